"""Teacher -> blind recurrent student on the Go2 task (issue 10, item 4 and its tests), with tiny settings.

The teacher is a frozen random MLP (a PPO checkpoint written before any update, orthogonal gains 1 so its actions
are O(0.1-1)) that reads ``policy`` and ``privileged``; the student is an LSTM/GRU that reads only ``policy``:

- the distillation loss falls on Go2 observations, well below what a constant action would score;
- a student checkpoint resumes exactly (weights, optimiser, recurrent state, env state, RNG);
- the exported student, run through onnxruntime with its state fed back, equals the torch student over a closed
  loop in Go2 (episode ends included).

Go2 with 8-16 envs, one MuJoCo thread, 8-16 step rollouts: about 10 s on one core.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("mujoco")

from rlcore.env.task import make_task
from rlcore.runners import DistillationRunner, OnPolicyRunner

TEACHER_GROUPS = ["policy", "privileged"]
TEACHER = {"class_name": "MLPModel", "hidden_dims": [32, 32], "obs_normalization": False}


def go2(num_envs: int = 8, seed: int = 0):
    return make_task("go2", num_envs=num_envs, seed=seed, sim={"threads": 1})


@pytest.fixture(scope="module")
def teacher_ckpt(tmp_path_factory) -> str:
    """A PPO checkpoint of a random, never-updated Go2 actor on ``policy + privileged``."""
    cfg = {"seed": 3, "num_steps_per_env": 8, "logger": "none",
           "obs_groups": {"actor": TEACHER_GROUPS, "critic": TEACHER_GROUPS},
           "actor": {**TEACHER, "init_gains": [1.0, 1.0, 1.0],
                     "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0}},
           "critic": {"class_name": "MLPModel", "hidden_dims": [32, 32]},
           "algorithm": {"class_name": "PPO"}}
    path = str(tmp_path_factory.mktemp("go2_teacher") / "model_0.pt")
    OnPolicyRunner(go2(), cfg, None).save(path)
    return path


def distill_cfg(rnn_type: str = "lstm", steps: int = 8, **alg) -> dict:
    return {"seed": 5, "num_steps_per_env": steps, "save_interval": 1, "logger": "none", "log_interval": 1_000_000,
            "obs_groups": {"student": ["policy"], "teacher": TEACHER_GROUPS},
            "student": {"class_name": "RNNModel", "rnn_type": rnn_type, "rnn_hidden_dim": 32, "hidden_dims": [32],
                        "obs_normalization": True},
            "teacher": dict(TEACHER),
            "algorithm": {"class_name": "Distillation", "learning_rate": 3e-3, "gradient_length": 4, **alg}}


def student_runner(teacher_ckpt: str, log_dir=None, env_seed: int = 0, num_envs: int = 8, **cfg) -> DistillationRunner:
    runner = DistillationRunner(go2(num_envs, env_seed), distill_cfg(**cfg), None if log_dir is None else str(log_dir))
    runner.load(teacher_ckpt)
    return runner


@pytest.mark.slow
def test_distillation_loss_falls_on_go2_observations(teacher_ckpt):
    runner = student_runner(teacher_ckpt, num_envs=16, steps=16, num_learning_epochs=2, gradient_length=8)
    teacher = {k: v.clone() for k, v in runner.alg.teacher.state_dict().items()}
    losses = []
    update = runner.alg.update

    def recorded():
        out = update()
        losses.append(out["behavior"])
        return out

    runner.alg.update = recorded
    runner.learn(20)
    # a constant action (the teacher's mean over the last rollout) would score the teacher's action variance
    actions = runner.alg.storage.privileged_actions.reshape(-1, 12)
    constant_mse = float(actions.var(0).mean())
    assert constant_mse > 0.02  # the random teacher's actions vary with the observations
    final = float(np.mean(losses[-3:]))
    assert final < 0.3 * losses[0], losses
    assert final < 0.3 * constant_mse, (final, constant_mse)
    for k, v in runner.alg.teacher.state_dict().items():  # the teacher stays frozen
        assert torch.equal(v, teacher[k]), k


def _snapshot(runner: DistillationRunner) -> dict:
    alg = runner.alg
    hidden = alg.student.get_hidden_state()
    return {"student": {k: v.clone() for k, v in alg.student.state_dict().items()},
            "opt": [{k: v.clone() for k, v in s.items() if isinstance(v, torch.Tensor)}
                    for s in alg.optimizer.state_dict()["state"].values()],
            "hidden": [h.clone() for h in (hidden if isinstance(hidden, tuple) else (hidden,))]}


def _identical(a: dict, b: dict) -> bool:
    same = all(torch.equal(v, b["student"][k]) for k, v in a["student"].items())
    same &= len(a["opt"]) == len(b["opt"]) > 0
    same &= all(torch.equal(v, sb[k]) for sa, sb in zip(a["opt"], b["opt"]) for k, v in sa.items())
    return same and all(torch.equal(x, y) for x, y in zip(a["hidden"], b["hidden"]))


@pytest.mark.slow
def test_student_checkpoint_resumes_exactly(teacher_ckpt, tmp_path, monkeypatch):
    # A: iterations 0 and 1 in one go
    uninterrupted = student_runner(teacher_ckpt, tmp_path / "a")
    uninterrupted.learn(2, init_at_random_ep_len=True)
    a = _snapshot(uninterrupted)
    # B: iteration 0, then a new runner and a new env (built with the same seed, as resume= with the same command
    # does; its state is the fresh one) resume model_0.pt for iteration 1. Go2's get_observations() draws new sensor
    # noise, so this also checks that the resumed run starts from the saved observation, not a fresh draw.
    first = student_runner(teacher_ckpt, tmp_path / "b")
    first.learn(1, init_at_random_ep_len=True)
    ckpt = str(tmp_path / "b" / "model_0.pt")
    resumed = DistillationRunner(go2(8), distill_cfg(), None)
    resumed.load(ckpt)  # the distillation checkpoint brings the teacher along
    assert resumed.alg.teacher_loaded and resumed.current_learning_iteration == 0
    resumed.learn(1, init_at_random_ep_len=True)
    assert resumed.current_learning_iteration == 1
    assert _identical(a, _snapshot(resumed))
    assert not torch.equal(a["hidden"][0], torch.zeros_like(a["hidden"][0]))  # a live recurrent state was compared

    # control: the same resume without the env's saved state continues differently, so the comparison can fail
    no_env = DistillationRunner(go2(8), distill_cfg(), None)
    monkeypatch.setattr(no_env.env, "load_state_dict", lambda state: None)
    no_env.load(ckpt)
    no_env.learn(1, init_at_random_ep_len=True)
    assert not _identical(a, _snapshot(no_env))


def test_student_env_continues_the_teachers_randomization_curriculum(tmp_path, teacher_ckpt):
    """A teacher whose run finished the domain-randomisation curriculum: its student trains on the whole robot pool
    from the first step (a fresh env draws only the pool's mildest variant until the curriculum advances)."""
    teacher_env = go2()
    steps = teacher_env.cfg_task.domain_rand.curriculum_steps
    assert steps > 0 and teacher_env.sim.num_variants == 64
    teacher_env.common_step_counter = 2 * steps  # as after a run of that many env steps
    trained = OnPolicyRunner(teacher_env, torch.load(teacher_ckpt, weights_only=True)["train_cfg"], None)
    path = str(tmp_path / "model_late.pt")
    trained.save(path)

    fresh = DistillationRunner(go2(32, 7), distill_cfg(), None)
    assert fresh.env.randomization_progress() == 0.0
    assert set(fresh.env.sim.env_variant.tolist()) == {0}  # the control: the curriculum's first robot only
    fresh.load(teacher_ckpt)  # a teacher saved at step 0: nothing to continue
    assert fresh.env.common_step_counter == 0 and set(fresh.env.sim.env_variant.tolist()) == {0}

    student = DistillationRunner(go2(32, 7), distill_cfg(), None)
    student.load(path)
    assert student.env.common_step_counter == 2 * steps and student.env.randomization_progress() == 1.0
    assert len(set(student.env.sim.env_variant.tolist())) > 10  # every env re-drew its robot from the whole pool


def test_continue_curriculum_draws_rough_terrain_levels_from_the_saved_ones():
    rough = {"type": "rough", "num_levels": 4, "num_cols": 2, "tile_size": 4.0, "max_init_level": 0}
    saved = make_task("go2", num_envs=6, seed=0, sim={"threads": 1}, terrain=rough)
    saved.terrain.levels = torch.tensor([3, 3, 2, 3, 2, 3])
    env = make_task("go2", num_envs=40, seed=1, sim={"threads": 1}, terrain=rough)
    assert set(env.terrain.levels.tolist()) == {0}
    env.continue_curriculum(saved.state_dict())
    assert set(env.terrain.levels.tolist()) == {2, 3}
    origins = env.terrain.origins(torch.arange(40))
    assert torch.allclose(env.spawn_xy, origins[:, :2])  # the reset placed every robot on its new level


def test_env_state_of_another_task_or_env_count_is_refused():
    """load_state_dict needs the same task and env count; continue_curriculum only the same task."""
    from rlcore.errors import ConfigError

    saved = go2(6).state_dict()
    env = go2(8)
    with pytest.raises(ConfigError, match="env state is for task Go2Env with num_envs=6; this is Go2Env with num_envs=8"):
        env.load_state_dict(saved)
    saved["common_step_counter"] = 123
    assert env.continue_curriculum(saved) and env.common_step_counter == 123  # another env count is fine here
    with pytest.raises(ConfigError, match="env state is for task Other"):
        env.continue_curriculum({**saved, "task": "Other"})


@pytest.mark.parametrize("rnn_type", ["lstm", "gru"])
@pytest.mark.slow
def test_exported_student_equals_torch_in_a_closed_loop(teacher_ckpt, tmp_path, rnn_type):
    """50 control steps of Go2 driven by onnxruntime (state fed back, zeroed at episode ends); the torch student sees
    the same observations: max |onnx - torch| < 1e-5."""
    import onnxruntime as ort

    from rlcore.deployment import read_onnx_interface

    runner = student_runner(teacher_ckpt, rnn_type=rnn_type)
    runner.learn(2)  # weights and normaliser statistics away from their initial values
    path = runner.export_policy_to_onnx(str(tmp_path))
    meta = read_onnx_interface(path)
    assert meta["obs_groups"] == ["policy"]  # the student is blind to the privileged group
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    n = 4
    state = {s["input"]: np.zeros((s["shape"][0], n, s["shape"][2]), dtype=np.float32) for s in meta["recurrent_state"]}
    assert sorted(state) == (["c_in", "h_in"] if rnn_type == "lstm" else ["h_in"])
    policy = runner.get_inference_policy()
    policy.reset()
    env = go2(n, seed=7)
    env.episode_length_buf[0] = env.max_episode_length - 20  # env 0 times out mid-loop: its state must restart
    worst, ends, moved = 0.0, 0, 0.0
    obs = env.get_observations()
    with torch.inference_mode():
        for _ in range(50):
            out = dict(zip(names, session.run(None, {"obs": obs["policy"].numpy(), **state})))
            eager = policy(obs).numpy()
            worst = max(worst, float(np.abs(out["actions"] - eager).max()))
            moved = max(moved, float(np.abs(out["actions"]).max()))
            obs, _, dones, _ = env.step(torch.from_numpy(out["actions"]))
            done = dones.numpy()
            ends += int(done.sum())
            for s in meta["recurrent_state"]:
                state[s["input"]] = out[s["output"]]
                state[s["input"]][:, done] = 0.0
            policy.reset(dones)
    env.close()
    assert ends >= 1 and moved > 1e-3
    assert worst < 1e-5, worst
