"""The Go2 observation history (``obs.history_length``): the ``policy_history`` group holds exactly the policy
frames returned at the previous steps, newest first; a new episode starts from its first frame repeated; it is
mirrored frame by frame, survives an exact resume, is described in the deployment interface, and an exported
policy that reads it runs in the ONNX-only robustness tool with the same actions as the torch policy."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("mujoco")

from rlcore.deployment import export_onnx, obs_layout, policy_metadata, read_onnx_interface
from rlcore.models import MLPModel
from rlcore.robustness import evaluate
from rlcore_tasks.go2 import Go2Env
from rlcore_tasks.go2.symmetry import mirror_observations
from rlcore_tasks.go2.variants import ROBUSTNESS_GRID, Go2VariantEnv

L = 3  # history frames
W = Go2Env.POLICY_SIZE


def make_env(n: int = 4, **kw) -> Go2Env:
    return Go2Env(num_envs=n, seed=2, sim={"threads": 1}, obs={"history_length": L}, episode_length_s=0.2, **kw)


def test_no_history_group_by_default():
    env = Go2Env(num_envs=2, sim={"threads": 1})
    assert "policy_history" not in env.get_observations().keys()
    assert "policy_history" not in env.deployment_interface()["observation_groups"]
    env.close()


def test_history_holds_the_frames_returned_before_newest_first():
    env = make_env()
    torch.manual_seed(0)
    obs = env.get_observations()
    frames = [obs["policy"].clone()]
    # a fresh env's history is its first frame, repeated
    assert torch.equal(obs["policy_history"], frames[0].repeat(1, L))
    episode_start = torch.zeros(env.num_envs, dtype=torch.long)  # index in frames of each env's episode start
    for t in range(1, 25):
        obs, _, dones, extras = env.step(0.3 * torch.randn(env.num_envs, 12))
        hist = obs["policy_history"].unflatten(1, (L, W))
        final = extras["final_observations"]["policy_history"].unflatten(1, (L, W))
        for e in range(env.num_envs):
            # the final observation continues the finished episode: newest frame = the one returned at t - 1
            past = [frames[max(t - k, int(episode_start[e]))][e] for k in range(1, L + 1)]
            assert torch.equal(final[e], torch.stack(past)), (t, e)
            if dones[e]:  # a new episode: every frame is its first policy frame
                episode_start[e] = t
                assert torch.equal(hist[e], obs["policy"][e].expand(L, W)), (t, e)
            else:
                assert torch.equal(hist[e], torch.stack(past)), (t, e)
        frames.append(obs["policy"].clone())
    assert int(episode_start.max()) > 0, "the test needs episodes that end (episode_length_s=0.2: 10 steps)"
    env.close()


def test_history_is_mirrored_frame_by_frame():
    env = make_env(n=2)
    for _ in range(3):
        obs, *_ = env.step(0.3 * torch.randn(2, 12))
    mirrored = mirror_observations(obs)
    frames = obs["policy_history"].unflatten(1, (L, W))
    for k in range(L):  # each frame mirrors as the policy group does
        one = mirror_observations(obs.select("policy").update({"policy": frames[:, k]}))["policy"]
        assert torch.equal(mirrored["policy_history"].unflatten(1, (L, W))[:, k], one)
    assert not torch.equal(mirrored["policy_history"], obs["policy_history"])
    env.close()


def test_history_survives_a_resume_exactly():
    a = make_env()
    for _ in range(5):
        a.step(0.3 * torch.randn(4, 12))
    state = a.state_dict()
    b = make_env()
    b.load_state_dict(state)
    actions = [0.3 * torch.randn(4, 12) for _ in range(4)]
    for act in actions:
        oa, *_ = a.step(act)
        ob, *_ = b.step(act)
        assert torch.equal(oa["policy_history"], ob["policy_history"])
        assert torch.equal(oa["policy"], ob["policy"])
    c = Go2Env(num_envs=4, seed=2, sim={"threads": 1}, obs={"history_length": L + 1})
    with pytest.raises(ValueError, match="history_length=4"):
        c.load_state_dict(state)
    for env in (a, b, c):
        env.close()


def test_negative_history_is_one_clear_error():
    with pytest.raises(ValueError, match="history_length: -1 frames"):
        Go2Env(num_envs=1, sim={"threads": 1}, obs={"history_length": -1})


def test_interface_describes_each_history_frame():
    env = make_env(n=1)
    groups = env.deployment_interface()["observation_groups"]
    hist, policy = groups["policy_history"], groups["policy"]
    assert hist["frames"] == L and hist["size"] == L * W and hist["history_of"] == "policy"
    names = [t["name"] for t in hist["terms"]]
    assert names[:6] == [f"{t['name']}@t-1" for t in policy["terms"]]
    assert names[-1] == "last_actions@t-3"
    jv = next(t for t in hist["terms"] if t["name"] == "joint_vel@t-2")
    jv1 = next(t for t in policy["terms"] if t["name"] == "joint_vel")
    assert (jv["start"], jv["stop"], jv["scale"]) == (W + jv1["start"], W + jv1["stop"], jv1["scale"])
    layout = obs_layout(["policy", "policy_history"], groups)
    assert layout[-1]["input_stop"] == (L + 1) * W and layout[len(policy["terms"])]["input_start"] == W
    assert hist["order"] == "newest_first" and hist["lags"] == list(range(1, L + 1))
    assert hist["before_episode_start"] == "first_frame"
    env.close()


def test_exported_history_policy_runs_in_the_robustness_tool(tmp_path):
    """A policy reading [policy, policy_history] exports with its history in the interface; the tool rebuilds the
    history from the file alone, and the ONNX actions equal the torch policy's on the same history."""
    env = make_env(n=1)
    torch.manual_seed(1)
    model = MLPModel(env.get_observations(), {"actor": ["policy", "policy_history"]}, "actor", 12, hidden_dims=[16])
    with torch.no_grad():
        model.mlp[-1].weight.mul_(0.01)  # small actions: the robot stands
    path = tmp_path / "policy.onnx"
    export_onnx(model.as_onnx(), str(path), metadata=policy_metadata(model.as_onnx(), model, env, "go2"))
    meta = read_onnx_interface(str(path))
    assert meta["observation_groups"]["policy_history"]["frames"] == L
    tool_env = Go2VariantEnv.from_interface(meta, 1, episode_s=2.0, threads=1)
    assert tool_env.cfg_task.obs.history_length == L
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    obs = tool_env.get_observations()
    for _ in range(10):
        flat = torch.cat([obs["policy"], obs["policy_history"]], dim=-1)
        onnx_actions = session.run(None, {"obs": flat.numpy()})[0]
        with torch.no_grad():
            torch_actions = model(obs)
        np.testing.assert_allclose(onnx_actions, torch_actions.numpy(), atol=1e-5)
        obs, *_ = tool_env.step(torch.from_numpy(onnx_actions))
    tool_env.close()
    nominal = [v for v in ROBUSTNESS_GRID if v.name == "nominal"]
    r = evaluate(str(path), nominal, [("zero", (0.0, 0.0, 0.0))], out=lambda _: None, settle_s=0.5,
                 measure_s=0.5, threads=1)
    assert r["falls"] == 0 and r["cases_n"] == 1 and r["nominal_err"] < 0.1
    env.close()
