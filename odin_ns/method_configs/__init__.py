"""Method specifications registered on nerfstudio's ``nerfstudio.method_configs`` entry-point group."""

from __future__ import annotations

from nerfstudio.configs.base_config import ViewerConfig
from nerfstudio.engine.optimizers import AdamOptimizerConfig
from nerfstudio.engine.schedulers import ExponentialDecaySchedulerConfig
from nerfstudio.plugins.types import MethodSpecification

from odin_ns.data.datamanager import OdinDataManagerConfig
from odin_ns.data.dataparser import OdinDataParserConfig
from odin_ns.gaussians import GAUSSIAN_GROUPS
from odin_ns.model import OdinSplatfactoModelConfig
from odin_ns.optim import ScopedAdamOptimizerConfig
from odin_ns.parse_errors import METHOD_NAME, say_invalid_choices_in_one_line
from odin_ns.pipeline import OdinPipelineConfig
from odin_ns.trainer import OdinTrainerConfig

say_invalid_choices_in_one_line()  # ns-train loads this module before it parses its command line


def gaussian_optimizers(max_steps: int) -> dict:
    """splatfacto's per-group learning rates and schedules; the Gaussians' groups use ScopedAdam."""

    def adam(lr: float, name: str = "") -> AdamOptimizerConfig:
        if name in GAUSSIAN_GROUPS:
            return ScopedAdamOptimizerConfig(lr=lr, eps=1e-15)
        return AdamOptimizerConfig(lr=lr, eps=1e-15)

    return {
        "means": {
            "optimizer": adam(1.6e-4, "means"),
            "scheduler": ExponentialDecaySchedulerConfig(lr_final=1.6e-6, max_steps=max_steps),
        },
        "features_dc": {"optimizer": adam(0.0025, "features_dc"), "scheduler": None},
        "features_rest": {"optimizer": adam(0.0025 / 20, "features_rest"), "scheduler": None},
        "opacities": {"optimizer": adam(0.05, "opacities"), "scheduler": None},
        "scales": {"optimizer": adam(0.005, "scales"), "scheduler": None},
        "quats": {"optimizer": adam(0.001, "quats"), "scheduler": None},
        "camera_opt": {
            "optimizer": adam(1e-4),
            "scheduler": ExponentialDecaySchedulerConfig(lr_final=5e-7, max_steps=max_steps, warmup_steps=1000, lr_pre_warmup=0),
        },
        "bilateral_grid": {
            "optimizer": adam(2e-3),
            "scheduler": ExponentialDecaySchedulerConfig(lr_final=1e-4, max_steps=max_steps, warmup_steps=1000, lr_pre_warmup=0),
        },
    }


odin_splatfacto = MethodSpecification(
    config=OdinTrainerConfig(
        method_name=METHOD_NAME,
        steps_per_eval_image=100,
        steps_per_eval_batch=0,
        steps_per_save=2000,
        steps_per_eval_all_images=1000,
        max_num_iterations=30000,
        mixed_precision=False,
        pipeline=OdinPipelineConfig(
            datamanager=OdinDataManagerConfig(dataparser=OdinDataParserConfig(), cache_images_type="uint8"),
            model=OdinSplatfactoModelConfig(),
        ),
        optimizers=gaussian_optimizers(max_steps=30000),
        viewer=ViewerConfig(num_rays_per_chunk=1 << 15),
        vis="viewer",
    ),
    description="Splatfacto trained with Odin primitive-level synchronization on one or many GPUs (or CPU).",
)
