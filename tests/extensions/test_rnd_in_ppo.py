"""RND inside PPO: the intrinsic reward reaches the stored reward, and PPO's update trains RND.

PPO is built by the factory (``construct_algorithm``) from an env that exposes ``step_dt``, as a user's would be,
and driven step by step the way the runner drives it. The prediction error is recomputed here from the RND
target and predictor nets and from the observations the env returned.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict

from rlcore.algorithms import construct_algorithm

N, T, STEP_DT, WEIGHT = 6, 4, 0.05, 2.0
SHAPES = {"policy": 4, "privileged": 2}


class RecordingEnv:
    """``N`` envs with random observations and rewards, a terminal every 3 steps for env 0, no time-outs.

    Keeps every reward and observation it returned (``rewards[t]``, ``observations[t + 1]``).
    """

    num_envs, num_actions, max_episode_length, device, cfg, step_dt = N, 2, 100, "cpu", {}, STEP_DT

    def __init__(self) -> None:
        self.gen = torch.Generator().manual_seed(1)
        self.episode_length_buf = torch.zeros(N, dtype=torch.long)
        self.observations = [self._obs()]
        self.rewards: list[torch.Tensor] = []

    def _obs(self) -> TensorDict:
        return TensorDict({k: torch.randn(N, d, generator=self.gen) + 1.5 for k, d in SHAPES.items()},
                          batch_size=[N])

    def get_observations(self) -> TensorDict:
        return self.observations[-1]

    def step(self, actions: torch.Tensor):
        rewards = torch.randn(N, generator=self.gen)
        dones = torch.zeros(N, dtype=torch.bool)
        dones[0] = len(self.rewards) % 3 == 2
        self.rewards.append(rewards.clone())
        self.observations.append(self._obs())
        return self.observations[-1], rewards, dones, {"time_outs": torch.zeros(N, dtype=torch.bool)}


def _ppo(env: RecordingEnv, **algorithm):
    rnd = {"weight": WEIGHT, "num_outputs": 8, "predictor_hidden_dims": [16], "target_hidden_dims": [16],
           "state_normalization": True, "reward_normalization": False, "learning_rate": 1e-2}
    cfg = {
        "num_steps_per_env": T,
        "obs_groups": {"actor": ["policy"], "critic": ["policy", "privileged"], "rnd_state": ["privileged", "policy"]},
        "actor": {"class_name": "MLPModel", "hidden_dims": [16],
                  "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0}},
        "critic": {"class_name": "MLPModel", "hidden_dims": [16]},
        "algorithm": {"class_name": "PPO", "rnd_cfg": rnd, **algorithm},
    }
    return construct_algorithm(env.get_observations(), env, cfg, "cpu")


def _collect(ppo, env: RecordingEnv) -> None:
    obs = env.get_observations()
    with torch.inference_mode():
        for _ in range(T):
            obs, rewards, dones, extras = env.step(ppo.act(obs))
            ppo.process_env_step(obs, rewards, dones, extras)
        ppo.compute_returns(obs)


def _state(obs: TensorDict) -> torch.Tensor:
    """The RND state of ``obs``: privileged then policy (the order of ``obs_groups["rnd_state"]``)."""
    return torch.cat([obs["privileged"], obs["policy"]], dim=-1)


def _seed_statistics(ppo) -> torch.Tensor:
    """Give RND's state normaliser statistics far from (0, 1); returns the states merged ``[M, D]``."""
    seed_obs = TensorDict({k: 3.0 * torch.randn(32, d) - 2.0 for k, d in SHAPES.items()}, batch_size=[32])
    ppo.rnd.update_normalization(seed_obs)
    return _state(seed_obs)


def test_stored_reward_is_extrinsic_plus_weight_dt_prediction_error():
    env = RecordingEnv()
    ppo = _ppo(env)
    assert ppo.rnd.step_dt == STEP_DT and ppo.rnd.weight == WEIGHT
    seen = _seed_statistics(ppo)
    mean, std = seen.mean(0), seen.var(0, unbiased=False).sqrt()
    _collect(ppo, env)
    with torch.no_grad():
        for t in range(T):
            x = (_state(env.observations[t + 1]) - mean) / (std + 1e-2)  # the obs returned by step t
            error = (ppo.rnd.target(x) - ppo.rnd.predictor(x)).square().sum(-1).sqrt()
            bonus = WEIGHT * STEP_DT * error
            assert bonus.min() > 0.01  # not negligible next to the extrinsic reward
            torch.testing.assert_close(ppo.storage.rewards[t].squeeze(-1), env.rewards[t] + bonus,
                                       rtol=1e-5, atol=1e-6)


def test_update_trains_the_predictor_and_merges_the_rollout_into_the_normaliser():
    env = RecordingEnv()
    ppo = _ppo(env, num_learning_epochs=3, num_mini_batches=2)
    seen = _seed_statistics(ppo)
    _collect(ppo, env)
    rnd = ppo.rnd
    rollout = _state(ppo.storage.observations).reshape(-1, 6).clone()
    target_before = [p.detach().clone() for p in rnd.target.parameters()]

    def predictor_loss() -> float:  # on the rollout, with the statistics the update trained under
        with torch.no_grad():
            x = (rollout - seen.mean(0)) / (seen.var(0, unbiased=False).sqrt() + 1e-2)
            return (rnd.predictor(x) - rnd.target(x)).square().mean().item()

    before = predictor_loss()
    ppo.update()
    after = predictor_loss()
    assert after < 0.8 * before, (before, after)
    assert all(torch.equal(a, b) for a, b in zip(target_before, rnd.target.parameters()))
    # the normaliser merged the whole rollout, once, after the mini-batches
    merged = torch.cat([seen, rollout])
    norm = rnd.state_normalizer
    assert int(norm.count) == merged.shape[0] == 32 + T * N
    torch.testing.assert_close(norm.mean, merged.mean(0), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(norm.var, merged.var(0, unbiased=False), rtol=1e-4, atol=1e-5)
