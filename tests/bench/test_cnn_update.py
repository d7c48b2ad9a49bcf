"""``bench/cnn_update.py``: the encoder's output size it reports is the conv arithmetic of the config, the variants
it sweeps change the encoder as named, and the last line carries the measured update."""

from __future__ import annotations

import re

import cnn_update
import pytest

pytestmark = pytest.mark.slow  # builds go2_rough and runs PPO updates


def test_default_encoder_features_and_the_last_line(capsys):
    # height_scan 1 x 17 x 11; the actor's conv 3x3 "same" at stride 2 -> 8 x 9 x 6; stride 2 -> 16 x 5 x 3; the
    # critic's scan has no conv layer (its 187 values enter its head), so only the actor's 240 features count
    result = cnn_update.main(["--tiny", "--iterations=1"])
    assert result["features"] == 16 * 5 * 3 == 240
    assert result["envs"] == 64 and result["update"] > 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert re.fullmatch(r"cnn_update: update=\d+\.\d\d features=240", last)


def test_a_variant_changes_the_encoder_as_named():
    result = cnn_update.main(["--tiny", "--iterations=1", *cnn_update.VARIANTS["stride_2_1"]])
    assert result["features"] == 16 * 9 * 6  # 17 x 11 -> 9 x 6 -> 9 x 6
    assert set(cnn_update.VARIANTS) >= {"two_cnns_16_32", "critic_cnn", "shared"}
