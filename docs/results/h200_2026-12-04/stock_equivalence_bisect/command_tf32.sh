#!/usr/bin/env bash
# One H200, 2026-12-04: pytorch_msssim's float32 gradient (stock splatfacto's SSIM) against float64 at 800x600, with
# cuDNN's TF32 convolutions allowed (PyTorch's default) and not, and run twice in each setting.
source .gpu/device_env.sh; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
save() { cp tf32.log $OUT/ 2>/dev/null; }
trap save EXIT
python3 - > tf32.log 2>&1 <<'PY'
import torch
from pytorch_msssim import SSIM
g = torch.Generator().manual_seed(0)
target = torch.rand(1, 600, 800, 3, generator=g)
predicted = (target + 0.05 * torch.randn(1, 600, 800, 3, generator=g)).clamp(0, 1)
target, predicted = target.cuda(), predicted.cuda()
def grad(dtype):
    leaf = predicted.to(dtype).clone().requires_grad_()
    SSIM(data_range=1.0, size_average=True, channel=3).cuda().to(dtype)(
        target.to(dtype).permute(0, 3, 1, 2), leaf.permute(0, 3, 1, 2)).backward()
    return leaf.grad.double()
exact = grad(torch.float64)
print("cudnn.benchmark", torch.backends.cudnn.benchmark, "allow_tf32 default", torch.backends.cudnn.allow_tf32)
for tf32 in (True, False):
    torch.backends.cudnn.allow_tf32 = tf32
    a, b = grad(torch.float32), grad(torch.float32)
    print(f"allow_tf32={tf32}: float32 against float64 {float((a - exact).norm() / exact.norm()):.3g}, "
          f"two float32 runs apart {float((a - b).norm() / exact.norm()):.3g}")
PY
cat tf32.log
