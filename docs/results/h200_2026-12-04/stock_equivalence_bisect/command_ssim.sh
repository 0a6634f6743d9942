#!/usr/bin/env bash
# One H200, 2026-12-04: is the full-resolution gradient difference odin's Triton kernels? The probe at full resolution
# with eager units and every odin kernel on its torch path (ODIN_KERNELS=torch: pytorch_msssim for the SSIM), and
# the Triton SSIM's gradient against pytorch_msssim's on 800x600 images, as a norm.
source .gpu/device_env.sh; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
save() { cp ssim_*.log $OUT/ 2>/dev/null; }
trap save EXIT
python3 - > ssim_gradient.log 2>&1 <<'PY'
import torch
from pytorch_msssim import SSIM
from odin_ns.kernels.ssim import fused_ssim
g = torch.Generator().manual_seed(0)
for related in (True, False):
    target = torch.rand(1, 600, 800, 3, generator=g)
    predicted = ((target + 0.05 * torch.randn(1, 600, 800, 3, generator=g)).clamp(0, 1) if related
                 else torch.rand(1, 600, 800, 3, generator=g))
    target, predicted = target.cuda(), predicted.cuda()
    grads = {}
    for backend in ("triton", "torch"):
        leaf = predicted.clone().requires_grad_()
        value = fused_ssim(leaf, target, backend=backend)
        value.backward()
        grads[backend] = (value.item(), leaf.grad)
    leaf = predicted.double().requires_grad_()
    value = SSIM(data_range=1.0, size_average=True, channel=3).cuda().double()(target.double().permute(0, 3, 1, 2), leaf.permute(0, 3, 1, 2))
    value.backward()
    for backend, (v, grad) in grads.items():
        print(related, backend, v, value.item(), float((grad.double() - leaf.grad).norm() / leaf.grad.norm()))
PY
cat ssim_gradient.log
ODIN_KERNELS=torch ODIN_DOWNSCALES=0 ODIN_RUNTIME="captured_units=False" timeout 150 python3 \
  docs/results/h200_2026-12-02/stock_equivalence/stock_vs_odin.py probe data/cup77 300 699 > ssim_probe_torch_kernels.log 2>&1
grep -E '^\{' ssim_probe_torch_kernels.log | cut -c1-1200
