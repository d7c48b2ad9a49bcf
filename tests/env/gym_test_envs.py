"""Tiny deterministic Gymnasium envs with hand-checkable episodes, registered under ``rlcore_test/...`` ids.

``rlcore_test/Counter-v0``: observation ``[steps taken, sum of actions]``; action ``Box(0, 2, (1,))``; reward = the
action; the episode terminates once the sum of actions reaches 3; time limit 5 steps (``TimeLimit`` truncation).
``rlcore_test/DictCounter-v0``: the same with a ``Dict`` observation ``{"count": [t, sum], "pixels": H x W x 1 image
filled with t}``.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces

COUNTER_ID = "rlcore_test/Counter-v0"
DICT_COUNTER_ID = "rlcore_test/DictCounter-v0"
TIME_LIMIT = 5
IMAGE_HW = (4, 5)


class CounterEnv(gym.Env):
    metadata: dict = {"render_modes": []}
    observation_space = spaces.Box(-np.inf, np.inf, (2,), np.float32)
    action_space = spaces.Box(0.0, 2.0, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.total = 0, 0.0
        return self._obs(), {}

    def step(self, action):
        a = float(np.asarray(action).reshape(-1)[0])
        self.t += 1
        self.total += a
        return self._obs(), a, self.total >= 3.0 - 1e-4, False, {}

    def _obs(self):
        return np.array([self.t, self.total], dtype=np.float32)


class DictCounterEnv(CounterEnv):
    observation_space = spaces.Dict({
        "count": spaces.Box(-np.inf, np.inf, (2,), np.float32),
        "pixels": spaces.Box(0, 255, (*IMAGE_HW, 1), np.uint8),
    })

    def _obs(self):
        return {"count": np.array([self.t, self.total], dtype=np.float32),
                "pixels": np.full((*IMAGE_HW, 1), self.t, dtype=np.uint8)}


def register_test_envs() -> None:
    for env_id, entry in ((COUNTER_ID, CounterEnv), (DICT_COUNTER_ID, DictCounterEnv)):
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=entry, max_episode_steps=TIME_LIMIT)
