"""Rough terrain of the Go2 task (rlcore_tasks/go2/terrain.py), its curriculum, the height scan's training errors
(rlcore_tasks/go2/scan.py) and the scan's layout in the deployment metadata (observations.interface).

Tile geometry is read back from MuJoCo's own height field (``model.hfield_data`` de-normalised with ``hfield_size``
and the ground geom's position), never from the generator's arrays; expected sizes are written out from the
documented settings (tan 25 deg, 5 cm and 18 cm steps, 0.3 m deep).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

pytest.importorskip("mujoco")

from rlcore.deployment import read_onnx_interface, write_onnx_metadata
from rlcore.env.task import make_task
from rlcore_tasks.go2 import scan
from rlcore_tasks.go2.config import TerrainCfg, no_randomization
from rlcore_tasks.go2.terrain import Terrain
from tests.tasks.test_go2 import GroundRay, make_env

HS, TILE, N = 0.1, 4.0, 40  # cell size [m], tile side [m], cells per tile side
# 4 levels (d = 0, 1/3, 2/3, 1); columns: a slope hill, a slope pit, stairs up, stairs down, random, discrete.
KINDS = ["slope", "slope", "stairs_up", "stairs_down", "random", "discrete"]
TERRAIN = {"type": "rough", "num_levels": 4, "num_cols": 6, "tile_size": TILE,
           "proportions": {"slope": 2.0, "rough_slope": 0.0, "stairs_up": 1.0, "stairs_down": 1.0, "random": 1.0,
                           "discrete": 1.0}}
HARDEST = 3
TAN25 = math.tan(math.radians(25.0))


@pytest.fixture(scope="module")
def field():
    """The env and MuJoCo's ground heights at every height-field vertex, ``[rows (y), cols (x)]`` (vertex (i, j) at
    world (j * 0.1, i * 0.1)), and the same cut to the tile grid (less the flat border around it)."""
    env = make_env(1, terrain=TERRAIN)
    m, geom = env.sim.model, env.sim.ground_geom
    hid = m.geom_dataid[geom]
    rows, cols = m.hfield_nrow[hid], m.hfield_ncol[hid]
    adr = m.hfield_adr[hid]
    data = np.asarray(m.hfield_data[adr:adr + rows * cols], dtype=np.float64).reshape(rows, cols)
    z = data * m.hfield_size[hid][2] + m.geom_pos[geom][2]
    b = int(round(env.terrain.border / HS))
    yield env, z[b:z.shape[0] - b, b:z.shape[1] - b], z
    env.close()


def tile(z: np.ndarray, level: int, col: int) -> np.ndarray:
    """The vertices of tile (level, col), ``[40 (y), 40 (x)]``, centre vertex at [20, 20] (the spawn point)."""
    return z[col * N:(col + 1) * N, level * N:(level + 1) * N]


def test_layout_and_mujoco_field(field):
    env, z, full = field
    t = env.terrain
    b = int(round(t.border / HS))
    assert t.tile_kinds() == KINDS and z.shape == (6 * N + 1, 4 * N + 1) and full.shape == (6 * N + 1 + 2 * b,
                                                                                            4 * N + 1 + 2 * b)
    assert np.all(full[:b] == 0) and np.all(full[-b:] == 0) and np.all(full[:, :b] == 0) and np.all(full[:, -b:] == 0)
    ray = GroundRay(env)  # the de-normalised field is the surface MuJoCo collides with
    for i, j in [(20, 20), (100, 135), (230, 57), (181, 13)]:
        assert ray((j + b) * HS, (i + b) * HS) == pytest.approx(z[i, j], abs=1e-5)
    assert np.abs(z).max() > 0.3
    assert t.difficulty_sizes(0)["step"] == pytest.approx(0.05) and t.difficulty_sizes(HARDEST)["step"] == 0.18
    assert t.difficulty_sizes(HARDEST)["slope"] == pytest.approx(TAN25)


@pytest.mark.parametrize("level, step", [(0, 0.05), (1, 0.05 + 0.13 / 3), (HARDEST, 0.18)])
@pytest.mark.parametrize("kind", ["stairs_up", "stairs_down"])
def test_stairs_step_height_and_depth(field, kind, level, step):
    env, z, _ = field
    assert env.terrain.difficulty_sizes(level)["step"] == pytest.approx(step)
    sign = 1.0 if kind == "stairs_up" else -1.0
    tz = tile(z, level, KINDS.index(kind))
    centre = tz[20, 20]
    # Four profiles walking out from the centre: +x, -x (along the centre row), +y, -y (along the centre column).
    for profile in (tz[20, 20:N], tz[20, 20::-1], tz[20:N, 20], tz[20::-1, 20]):
        rel = (profile - centre) * sign  # climbed (stairs up) or descended (stairs down) [m]
        jumps = np.flatnonzero(np.abs(np.diff(rel)) > 1e-6)  # vertex k -> k + 1 crosses a step edge
        assert len(jumps) >= 3
        np.testing.assert_allclose(np.diff(rel)[jumps], step, atol=1e-5)  # each edge goes one step up (down)
        np.testing.assert_allclose(np.diff(jumps) * HS, 0.3, atol=1e-9)  # each step is 0.3 m deep
        assert np.all(rel[:jumps[0] + 1] == 0.0)  # the platform, then the first step at its edge
        assert jumps[0] * HS == pytest.approx(0.9, abs=0.1 + 1e-9)  # the 2 m platform's edge (half a cell)


@pytest.mark.parametrize("level, degrees", [(0, 0.0), (1, 25.0 / 3), (HARDEST, 25.0)])
def test_slope_angle_hill_and_pit(field, level, degrees):
    env, z, _ = field
    rise = math.tan(math.radians(degrees))
    assert env.terrain.difficulty_sizes(level)["slope"] == pytest.approx(rise)
    for col, sign in ((0, -1.0), (1, 1.0)):  # column 0 a hill (down walking out), column 1 a pit (up)
        tz = tile(z, level, col)
        for profile in (tz[20, 20:N], tz[20, 20::-1], tz[20:N, 20], tz[20::-1, 20]):
            outside = profile[11:]  # vertices 1.1 m and more from the centre: beyond the platform
            slopes = np.diff(outside) / HS
            np.testing.assert_allclose(slopes, sign * rise, atol=1e-4)
            assert math.degrees(math.atan(abs(slopes.mean()))) == pytest.approx(degrees, abs=1e-3)
    if level == HARDEST:  # the tile's corners, 0.9 m (+1.9, +1.9) and 1.0 m (-2, -2) past the platform's edge
        assert tile(z, level, 0)[39, 39] == pytest.approx(-0.9 * TAN25, abs=1e-4)
        assert tile(z, level, 1)[39, 39] == pytest.approx(0.9 * TAN25, abs=1e-4)
        assert tile(z, level, 0)[0, 0] == pytest.approx(-1.0 * TAN25, abs=1e-4)


def _ground_and_obstacles(z: np.ndarray, level: int) -> tuple[float, np.ndarray]:
    """The discrete tile's ground height (its commonest height outside the platform) and its distinct heights."""
    tz = np.round(tile(z, level, KINDS.index("discrete")), 6)
    outside = np.maximum(*np.abs(np.meshgrid(np.arange(N) - 20, np.arange(N) - 20))) > 10
    values, counts = np.unique(tz[outside], return_counts=True)
    return float(values[np.argmax(counts)]), np.unique(tz)


def test_discrete_obstacle_heights(field):
    env, z, _ = field
    for level in range(4):
        h = env.terrain.difficulty_sizes(level)["obstacle"]
        ground, values = _ground_and_obstacles(z, level)
        # Relative to the ground between them, obstacles are raised or sunk by h or h / 2 (the platform: see below).
        heights = np.round(values[~np.isclose(values, 0.0)] - ground, 6)
        allowed = np.round([-h, -h / 2, 0.0, h / 2, h], 6)
        assert np.all(np.isin(heights, allowed)), (level, heights, allowed)
        assert len(values) >= 4  # the obstacles take several of the four heights
    assert env.terrain.difficulty_sizes(0)["obstacle"] == pytest.approx(0.03)
    assert env.terrain.difficulty_sizes(HARDEST)["obstacle"] == pytest.approx(0.15)


def test_discrete_platform_is_at_the_ground_height(field):
    _, z, _ = field
    assert [_ground_and_obstacles(z, level)[0] for level in range(4)] == [0.0] * 4


def test_random_bumps_within_the_roughness(field):
    env, z, _ = field
    col = KINDS.index("random")
    for level in range(4):
        a = 0.06 * max(level / 3, 0.1)
        assert env.terrain.difficulty_sizes(level)["roughness"] == pytest.approx(a)
        tz = tile(z, level, col)
        # Heights are drawn in [-a, a]: any two differ by at most 2a.
        assert np.ptp(tz) <= 2 * a + 1e-5 and np.abs(tz).max() <= 2 * a + 1e-5
        assert np.ptp(tz) > a  # and the draws do spread


def test_every_platform_is_flat_at_the_centre_height(field):
    env, z, _ = field
    for level in range(4):
        for col in range(len(KINDS)):
            tz = tile(z, level, col)
            assert tz[20, 20] == pytest.approx(0.0, abs=1e-5)  # the spawn point
            # Vertices within the 2 m platform (|d| <= 1 m).
            np.testing.assert_allclose(tz[10:31, 10:31], 0.0, atol=1e-5, err_msg=f"level {level} col {col}")
    origins = env.terrain.origins(torch.tensor([0]))
    assert origins[0, 2].item() == pytest.approx(0.0, abs=1e-6)


def test_platform_reaches_its_full_size_on_both_sides(field):
    _, z, _ = field
    tz = tile(z, HARDEST, KINDS.index("stairs_up"))
    np.testing.assert_allclose(tz[10:31, 10:31], 0.0, atol=1e-5)  # vertices at |dx|, |dy| <= 1.0 m


# ---------------------------------------------------------------------------------------------- determinism
def _heights(seed: int) -> tuple[np.ndarray, list[str]]:
    cfg = TerrainCfg(**{**TERRAIN, "seed": seed})
    t = Terrain(cfg, 2, torch.device("cpu"), torch.Generator().manual_seed(0))
    return t.heights_np, t.tile_kinds()


def test_generation_is_deterministic_per_seed():
    (a, kinds), (b, _), (c, _) = _heights(0), _heights(0), _heights(1)
    assert np.array_equal(a, b)
    for col, kind in enumerate(kinds):
        ya, yc = a[col * N:(col + 1) * N], c[col * N:(col + 1) * N]
        if kind in ("random", "discrete"):
            assert not np.array_equal(ya, yc), kind
        else:
            assert np.array_equal(ya, yc), kind


# ---------------------------------------------------------------------------------------------- curriculum
def _terrain(num_envs: int, **cfg) -> Terrain:
    return Terrain(TerrainCfg(**{**TERRAIN, **cfg}), num_envs, torch.device("cpu"), torch.Generator().manual_seed(0))


def test_curriculum_rule():
    t = _terrain(7)
    t.levels[:] = torch.tensor([1, 1, 1, 1, 0, 2, 2])
    # tile 4 m: walked > 2 m up; else walked < 0.5 x commanded down; else kept
    walked = torch.tensor([2.01, 1.9, 0.99, 1.01, 0.1, 2.5, 1.99])
    commanded = torch.tensor([10.0, 3.0, 2.0, 2.0, 5.0, 0.0, 3.9])
    t.update_curriculum(torch.arange(7), walked, commanded)
    assert t.levels.tolist() == [2, 1, 0, 1, 0, 3, 2]
    t.levels[:] = 1  # only the envs named move
    t.update_curriculum(torch.tensor([2]), torch.tensor([3.0]), torch.tensor([0.0]))
    assert t.levels.tolist() == [1, 1, 2, 1, 1, 1, 1]
    off = _terrain(3, curriculum=False)
    off.levels[:] = torch.tensor([0, 1, 3])
    off.update_curriculum(torch.arange(3), torch.tensor([3.0, 0.0, 3.0]), torch.tensor([0.0, 5.0, 0.0]))
    assert off.levels.tolist() == [0, 1, 3]


def test_promoted_past_the_hardest_level_spread_over_every_level():
    t = _terrain(2000)
    t.levels[:] = HARDEST
    t.update_curriculum(torch.arange(2000), torch.full((2000,), 3.0), torch.zeros(2000))
    counts = torch.bincount(t.levels, minlength=4)
    assert counts.numel() == 4 and (counts > 350).all(), counts  # uniform: 500 each
    assert (t.levels < HARDEST).sum() > 1000  # not all sent to (or kept at) the hardest level


def test_an_episode_end_promotes_by_the_distance_walked_from_the_spawn_point():
    env = make_env(2, terrain=TERRAIN)
    t = env.terrain
    t.levels[:] = 1
    env._reset_envs(torch.arange(2))
    env._refresh_state()
    spawn = env.spawn_xy.clone()
    x0 = t.border  # the tile grid starts after the flat border
    assert torch.allclose(spawn[:, 0], torch.tensor([x0 + 6.0, x0 + 6.0]))  # level 1's tile centre x
    env.sim.qpos[0, 0:3] = [spawn[0, 0].item() + 3.0, spawn[0, 1].item(), 0.6]  # 3 m from its spawn point
    env.sim.refresh()
    env._refresh_state()
    env.episode_length_buf[0] = env.max_episode_length - 1  # its episode times out at this step
    _, _, dones, extras = env.step(torch.zeros(2, 12))
    assert dones.tolist() == [True, False] and extras["time_outs"][0]
    assert t.levels.tolist() == [2, 1]
    assert env.base_pos[0, 0].item() == pytest.approx(x0 + 10.0, abs=0.01)  # respawned on level 2's tile centre
    env.close()


# ---------------------------------------------------------------------------------------------- scan errors
ERRORS = {**no_randomization(), "randomize_height_scan": True, "scan_offset": 0.05, "scan_missing_fraction": 0.0,
          "scan_max_lag": 0}
NOISY = {"add_noise": True, "noise_height": 0.0, "noise_ang_vel": 0.0, "noise_gravity": 0.0, "noise_dof_pos": 0.0,
         "noise_dof_vel": 0.0}


def scan_env(num_envs: int = 3, add_noise: bool = True, **dr) -> object:
    obs = NOISY if add_noise else {"add_noise": False}
    env = make_env(num_envs, terrain=TERRAIN, obs=obs, domain_rand={**ERRORS, **dr})
    env.terrain.levels[:] = HARDEST
    env._reset_envs(torch.arange(num_envs))
    env._refresh_state()
    return env


def exact_scan(env, pose: torch.Tensor) -> torch.Tensor:
    """base z minus the terrain under the grid (written out: x -0.8..0.8, y -0.5..0.5 at 0.1) placed at ``pose``."""
    lx, ly = torch.meshgrid(torch.linspace(-0.5, 0.5, 11), torch.linspace(-0.8, 0.8, 17), indexing="ij")[::-1]
    c, s = torch.cos(pose[:, 2])[:, None, None], torch.sin(pose[:, 2])[:, None, None]
    wx = pose[:, 0, None, None] + c * lx - s * ly
    wy = pose[:, 1, None, None] + s * lx + c * ly
    return env.base_pos[:, 2, None, None] - env.terrain.height_at(torch.stack([wx, wy], -1))


def test_scan_offset_shifts_every_cell():
    env = scan_env()
    assert scan.active(env)
    off = env.scan_offset.clone()
    assert (off != 0).all() and (off.abs() <= 0.05).all() and off.unique().numel() == 3
    shifted, obs = scan.height_above_terrain(env), env._observe()["height_scan"][:, 0]
    env.cfg_task.domain_rand.randomize_height_scan = False
    exact, obs_exact = scan.height_above_terrain(env), env._observe()["height_scan"][:, 0]
    assert torch.allclose(shifted - exact, off[:, None, None].expand_as(exact), atol=1e-5)
    assert torch.allclose(obs - obs_exact, 5.0 * off[:, None, None].expand_as(exact), atol=1e-4)  # unclipped
    env.close()


def test_scan_lag_reads_the_pose_of_k_steps_ago():
    env = scan_env(3, scan_max_lag=3, scan_offset=0.0)
    assert env.scan_poses.shape == (4, 3, 3)
    rng = torch.Generator().manual_seed(5)
    # Known poses k steps ago on the hardest stairs tiles' edges (x 13.1..14.9, y 9.1..14.9), any yaw.
    x0 = env.terrain.border  # the tile grid starts after the flat border
    poses = torch.stack([x0 + 13.1 + 1.8 * torch.rand(4, 3, generator=rng),
                         x0 + 9.1 + 5.8 * torch.rand(4, 3, generator=rng),
                         (torch.rand(4, 3, generator=rng) * 2 - 1) * math.pi], dim=-1)
    env.scan_poses.copy_(poses)
    env.scan_lag.copy_(torch.tensor([0, 2, 3]))
    got = scan.height_above_terrain(env)
    for e, k in enumerate([0, 2, 3]):
        expected = exact_scan(env, poses[k])[e]
        assert torch.allclose(got[e], expected, atol=1e-5)
        assert not torch.allclose(got[e], exact_scan(env, poses[(k + 1) % 4])[e], atol=1e-2)  # the lag matters
    # Each control step pushes the pose (x, y, yaw) after the physics step, newest first.
    before = env.scan_poses.clone()
    env.step(torch.zeros(3, 12))
    assert torch.equal(env.scan_poses[1:], before[:-1])
    yaw = torch.atan2(2 * (env.base_quat[:, 0] * env.base_quat[:, 3] + env.base_quat[:, 1] * env.base_quat[:, 2]),
                      1 - 2 * (env.base_quat[:, 2] ** 2 + env.base_quat[:, 3] ** 2))
    assert torch.allclose(env.scan_poses[0], torch.cat([env.base_pos[:, :2], yaw[:, None]], -1), atol=1e-5)
    env.close()


def test_missing_cells_read_the_missing_value_at_the_configured_fraction():
    env = scan_env(4, scan_missing_fraction=0.25, scan_offset=0.0)
    dr = env.cfg_task.domain_rand
    missing, masks = 0, []
    for _ in range(10):
        dr.scan_missing_fraction = 0.25
        obs = env._observe()["height_scan"]
        dr.scan_missing_fraction = 0.0
        exact = env._observe()["height_scan"]
        mask = obs != exact
        assert torch.all(obs[mask] == scan.MISSING_VALUE) and scan.MISSING_VALUE == 0.0
        assert (exact != 0).all()  # so a missing cell shows
        masks.append(mask)
        missing += int(mask.sum())
    total = 10 * 4 * 11 * 17
    assert missing / total == pytest.approx(0.25, abs=0.03)
    assert not torch.equal(masks[0], masks[1])  # drawn anew at every step
    env.close()


def test_no_scan_errors_without_observation_noise():
    env = scan_env(3, add_noise=False, scan_max_lag=2, scan_missing_fraction=0.5)
    assert not scan.active(env) and (env.scan_offset == 0).all()  # not drawn (the random stream is untouched)
    env.scan_offset.fill_(0.05)  # and not applied, were it set
    env.scan_lag.fill_(2)
    env.scan_poses.add_(1.0)  # poses elsewhere: would change the scan
    pose = torch.cat([env.base_pos[:, :2], torch.zeros(3, 1)], -1)  # spawned with yaw 0
    expected = (exact_scan(env, pose) - 0.30).clamp(-1.0, 1.0) * 5.0
    assert torch.allclose(env._observe()["height_scan"][:, 0], expected, atol=1e-5)
    env.close()


# ---------------------------------------------------------------------------------------------- metadata
@pytest.mark.slow  # builds a go2_rough env and writes an ONNX file (about 1 s)
def test_scan_metadata_reproduces_the_grid_and_the_observation(tmp_path):
    import onnx
    from onnx import TensorProto, helper

    env = make_task("go2_rough", num_envs=1, seed=0, sim={"threads": 1}, terrain=TERRAIN, obs={"add_noise": False},
                    domain_rand={"num_variants": 1})
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    path = tmp_path / "p.onnx"
    onnx.save(helper.make_model(graph), str(path))
    write_onnx_metadata(path, env.deployment_interface())
    meta = read_onnx_interface(path)["observation_groups"]["height_scan"]
    assert meta["shape"] == [1, 11, 17] and meta["scale"] == 5.0 and "quantity" in meta  # older readers' keys
    p, m = meta["points"], meta["measures"]
    assert p["frame"] == "base_yaw" and p["order"] == "row_major_y_then_x" and p["shape"] == [11, 17]
    assert m["quantity"] == "base_height_above_terrain" and m["offset"] == 0.30 and m["clip_raw"] == [-1.0, 1.0]
    assert m["scale"] == 5.0 and meta["missing_value"] == 0.0
    # The points: row i at y0 + i r, column j at x0 + j r, are the env's grid.
    i, j = np.meshgrid(np.arange(p["shape"][0]), np.arange(p["shape"][1]), indexing="ij")
    local = np.stack([p["x"][0] + j * p["resolution"], p["y"][0] + i * p["resolution"]], -1)
    np.testing.assert_allclose(local, env._scan_local.numpy(), atol=1e-6)
    # The formula on MuJoCo's ground (ray casts) at the points placed at a known pose reproduces the observation.
    x0 = env.terrain.border  # the tile grid starts after the flat border
    yaw, base = 0.6, [x0 + 14.2, x0 + 10.6, 0.55]  # hardest level, stairs up: steps under the grid
    env.sim.qpos[0, 0:3] = base
    env.sim.qpos[0, 3:7] = [math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)]
    env.sim.refresh()
    env._refresh_state()
    ray = GroundRay(env)
    wx = base[0] + math.cos(yaw) * local[..., 0] - math.sin(yaw) * local[..., 1]
    wy = base[1] + math.sin(yaw) * local[..., 0] + math.cos(yaw) * local[..., 1]
    terrain = np.vectorize(ray)(wx, wy)
    assert np.ptp(terrain) > 0.3
    value = np.clip(base[2] - terrain - m["offset"], *m["clip_raw"]) * m["scale"]
    np.testing.assert_allclose(env._observe()["height_scan"][0, 0].numpy(), value, atol=1e-4)
    # Training perturbations: training-only, the cfg's amplitudes where they apply, zero with the noise off.
    tp = meta["training_perturbations"]
    assert tp["training_only"] is True and tp["control_dt"] == pytest.approx(0.02)
    assert tp["noise"] == 0.0 and tp["offset_per_episode_m"] == 0.0 and tp["max_lag_steps"] == 0
    env.close()
    noisy = make_task("go2_rough", num_envs=1, seed=0, sim={"threads": 1}, terrain=TERRAIN,
                      domain_rand={"num_variants": 1})
    tp = noisy.deployment_interface()["observation_groups"]["height_scan"]["training_perturbations"]
    assert tp["noise"] == pytest.approx(0.1 * 5.0) and tp["noise_m"] == pytest.approx(0.1)
    assert tp["offset_per_episode_m"] == 0.03 and tp["missing_fraction"] == 0.05 and tp["max_lag_steps"] == 2
    noisy.close()


def test_exact_resume_keeps_the_scan_errors():
    """The scan's per-episode offset and lag and its pose history are saved: a resumed env's scans (and everything
    else) equal the original's, step for step."""
    kw = dict(quiet=False, terrain=TERRAIN, domain_rand={"num_variants": 4, "scan_max_lag": 3,
                                                          "curriculum_steps": 0})
    a, b = make_env(3, seed=4, **kw), make_env(3, seed=4, **kw)
    gen = torch.Generator().manual_seed(0)
    for _ in range(5):
        a.step(torch.randn(3, 12, generator=gen) * 0.3)
    b.step(torch.randn(3, 12, generator=gen))  # b elsewhere before loading
    assert scan.active(a) and (a.scan_lag > 0).any() and (a.scan_offset != 0).all()
    state = a.state_dict()
    assert {"scan_offset", "scan_lag", "scan_poses"} <= set(state)
    actions = [torch.randn(3, 12, generator=gen) * 0.3 for _ in range(8)]
    out_a = [a.step(act)[0]["height_scan"] for act in actions]
    b.load_state_dict(state)
    assert torch.equal(b.scan_poses, state["scan_poses"])
    out_b = [b.step(act)[0]["height_scan"] for act in actions]
    for sa, sb in zip(out_a, out_b):
        assert torch.equal(sa, sb)
    a.close()
    b.close()


@pytest.mark.slow  # exports a CNN policy and runs the robustness tool on it (about 2 s)
def test_a_rough_policy_runs_in_the_robustness_tool_with_its_scan_fed(tmp_path):
    """A go2_rough actor (policy, policy_history, height_scan through a CNN) exports with a ``height_scan`` input;
    the tool's env (flat ground) is rebuilt from the file alone and feeds it the scan: the ONNX actions on the tool's
    observations equal the torch policy's, and they depend on the scan."""
    import onnxruntime as ort

    from rlcore.deployment import export_onnx, policy_metadata
    from rlcore.models import CNNModel
    from rlcore.robustness import evaluate
    from rlcore_tasks.go2.variants import ROBUSTNESS_GRID, Go2VariantEnv

    env = make_task("go2_rough", num_envs=1, seed=0, sim={"threads": 1}, terrain=TERRAIN,
                    domain_rand={"num_variants": 1}, obs={"history_length": 5})
    torch.manual_seed(1)
    model = CNNModel(env.get_observations(), {"actor": ["policy", "policy_history", "height_scan"]}, "actor", 12,
                     hidden_dims=[16], cnn_cfg={"output_channels": [4, 8], "kernel_size": 3, "stride": [2, 2]})
    with torch.no_grad():
        model.mlp[-1].weight.mul_(0.01)  # small actions: the robot stands
    path = tmp_path / "rough.onnx"
    export_onnx(model.as_onnx(), str(path), metadata=policy_metadata(model.as_onnx(), model, env, "go2_rough"))
    meta = read_onnx_interface(str(path))
    assert [i["name"] for i in meta["inputs"]] == ["obs", "height_scan"] and meta["task"] == "go2_rough"
    tool_env = Go2VariantEnv.from_interface(meta, 1, episode_s=2.0, threads=1)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    obs = tool_env.get_observations()
    for _ in range(5):
        feeds = {"obs": torch.cat([obs["policy"], obs["policy_history"]], dim=-1).numpy(),
                 "height_scan": obs["height_scan"].numpy()}
        onnx_actions = session.run(None, feeds)[0]
        with torch.no_grad():
            np.testing.assert_allclose(onnx_actions, model(obs).numpy(), atol=1e-5)
        obs, *_ = tool_env.step(torch.from_numpy(onnx_actions))
    other = session.run(None, {**feeds, "height_scan": feeds["height_scan"] + 1.0})[0]
    assert np.abs(other - session.run(None, feeds)[0]).max() > 1e-6  # the scan input is used
    tool_env.close()
    nominal = [v for v in ROBUSTNESS_GRID if v.name == "nominal"]
    r = evaluate(str(path), nominal, [("zero", (0.0, 0.0, 0.0))], out=lambda _: None, settle_s=0.5,
                 measure_s=0.5, threads=1)
    assert r["falls"] == 0 and r["cases_n"] == 1
    env.close()
