"""Batch scaling in one place: B views per step (world size x views per rank) scale lr, eps, betas and schedules."""

from __future__ import annotations

import copy
import math

import pytest

from odin_ns.batch import VIEW_COUNTED_SCHEDULES, scale_for_batch
from odin_ns.method_configs import odin_splatfacto
from odin_ns.trainer import OdinTrainer


def test_grendel_rules_for_b_views():
    config = copy.deepcopy(odin_splatfacto.config)
    before = copy.deepcopy(config)
    model = scale_for_batch(config.optimizers, config.pipeline.model, views_per_step=8)
    for name, group in config.optimizers.items():
        old, new = before.optimizers[name]["optimizer"], group["optimizer"]
        assert new.lr == pytest.approx(old.lr * math.sqrt(8)), name
        assert new.eps == pytest.approx(old.eps / math.sqrt(8)), name
        if hasattr(old, "betas"):  # the Gaussians' ScopedAdam; nerfstudio's Adam config keeps torch's default betas
            assert new.betas == pytest.approx(tuple(beta**8 for beta in old.betas)), name
        if group["scheduler"] is not None:
            assert group["scheduler"].max_steps == before.optimizers[name]["scheduler"].max_steps // 8
    assert model.views_per_step == 8
    for name in VIEW_COUNTED_SCHEDULES:
        assert getattr(model, name) == max(1, getattr(before.pipeline.model, name) // 8), name


def test_the_linear_rule_multiplies_learning_rates_and_their_final_values_by_b():
    config = copy.deepcopy(odin_splatfacto.config)
    before = copy.deepcopy(config)
    scale_for_batch(config.optimizers, config.pipeline.model, views_per_step=4, lr_exponent=1.0)
    for name, group in config.optimizers.items():
        old = before.optimizers[name]
        assert group["optimizer"].lr == pytest.approx(old["optimizer"].lr * 4), name
        assert group["optimizer"].eps == pytest.approx(old["optimizer"].eps / 2), name
        if group["scheduler"] is not None and old["scheduler"].lr_final is not None:
            assert group["scheduler"].lr_final == pytest.approx(old["scheduler"].lr_final * 4), name


def test_one_view_per_step_changes_nothing():
    config = copy.deepcopy(odin_splatfacto.config)
    before = copy.deepcopy(config)
    assert scale_for_batch(config.optimizers, config.pipeline.model, views_per_step=1) is config.pipeline.model
    assert config.optimizers == before.optimizers


def test_the_trainer_scales_for_world_size_times_views_per_rank(tiny_scene, tmp_path):
    config = copy.deepcopy(odin_splatfacto.config)
    config.data, config.output_dir, config.machine.device_type = tiny_scene, tmp_path, "cpu"
    config.pipeline.datamanager.views_per_rank = 4
    lr = config.optimizers["means"]["optimizer"].lr
    trainer = OdinTrainer(config)
    assert trainer.config.pipeline.model.views_per_step == 4
    assert trainer.config.optimizers["means"]["optimizer"].lr == pytest.approx(lr * 2)


def test_the_trainer_takes_the_power_of_b_from_the_pipeline(tiny_scene, tmp_path):
    config = copy.deepcopy(odin_splatfacto.config)
    config.data, config.output_dir, config.machine.device_type = tiny_scene, tmp_path, "cpu"
    config.pipeline.datamanager.views_per_rank = 4
    config.pipeline.lr_batch_exponent = 1.0
    lr = config.optimizers["means"]["optimizer"].lr
    assert OdinTrainer(config).config.optimizers["means"]["optimizer"].lr == pytest.approx(lr * 4)


@pytest.mark.parametrize("options, message", [
    ({"lr_batch_exponent": 2.0}, r"lr_batch_exponent must be within \[0, 1\]"),
    ({"lr_batch_exponent": 1.0, "scale_with_batch": False}, "only with scale_with_batch True"),
])
def test_a_power_of_b_that_would_not_apply_is_refused(options, message):
    from odin_ns.pipeline import OdinPipelineConfig

    with pytest.raises(ValueError, match=message):
        OdinPipelineConfig(**options)
