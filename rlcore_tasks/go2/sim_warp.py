"""The MuJoCo Warp backend of :class:`~rlcore_tasks.go2.sim_interface.Simulator` (config ``sim.backend: warp``).

The same scene, variant pool and actuation latency as the CPU backend (:class:`~rlcore_tasks.go2.sim.MujocoSim` holds
them), stepped by `MuJoCo Warp <https://github.com/google-deepmind/mujoco_warp>`_: one batched ``mjw.Data`` of N
worlds on a Warp device (``cuda:k`` for a torch device ``cuda:k``, Warp's CPU device for ``cpu``). State views are
``wp.to_torch`` views of the Warp arrays (zero copy, float32 like Warp itself), so nothing goes through the host per
step; targets, resets and pushes are written into those views by torch.

Domain randomisation per world. Every model array that MuJoCo Warp lets vary per world (the ``Model`` fields whose
shape starts with ``*``) and that some variant of the pool changes gets a leading dimension of N; an env's reset
copies its variant's rows (as compiled by :func:`~rlcore_tasks.go2.randomization.apply_variant`, derived constants
included: subtree masses, inverse weights, ``actuator_acc0``) into its world. That covers joint damping,
frictionloss and armature, foot solref/solimp, link masses and inertia, payload and CoM, kp/kd and motor strength
(actuator gain and bias) and ground friction; latency is the shared torch pipeline. One field cannot vary per
world: ``geom_condim`` (the contact's dimension fixes its number of constraint rows). Variants that change it are
simulated at the nominal condim, and the backend says so once (:attr:`WarpSim.unsupported`).

Differences from the rollout backend, by design of the engines: Warp computes in float32 (the rollout backend in
float64), and its collision and constraint kernels are other implementations of the same model (``tests`` bound
the per-step state difference). A physics failure is a non-finite state or a speed over :data:`MAX_SPEED` at any
physics step of a control step; Warp has no automatic reset of a diverged world (the rollout backend's clock check).
"""

from __future__ import annotations

import dataclasses

import mujoco
import numpy as np
import torch

from rlcore.env import ConfigError
from rlcore_tasks.go2.config import Go2Cfg
from rlcore_tasks.go2.sim import MAX_SPEED, MujocoSim, _numpy
from rlcore_tasks.go2.terrain import Terrain


def _import_warp():
    try:
        import warp as wp

        # before Warp initialises: no banner, no line per compiled kernel module (Warp >= 1.12: log_level)
        wp.config.log_level = getattr(wp, "LOG_WARNING", 30)
        wp.config.quiet = True
        import mujoco_warp as mjw
    except ImportError as e:  # pragma: no cover - the extra is part of the test install
        raise ConfigError(f"sim.backend=warp needs MuJoCo Warp ({e.name} is not installed): "
                          "pip install 'rlcore[warp]'") from e
    return wp, mjw


def batchable_fields() -> list[str]:
    """Names of the MuJoCo Warp ``Model`` arrays that may differ between worlds (shape ``("*", ...)``)."""
    _, mjw = _import_warp()
    from mujoco_warp._src import warp_util

    return [f.name for f in dataclasses.fields(mjw.Model) if warp_util.is_array_spec(f.type)
            and getattr(f.type, "shape", ())[:1] == ("*",)]


def changed_fields(nominal: mujoco.MjModel, variants: list[mujoco.MjModel]) -> list[str]:
    """The ``MjModel`` arrays in which some variant differs from ``nominal``."""
    names = [n for n in dir(nominal) if not n.startswith("_") and isinstance(getattr(nominal, n), np.ndarray)]
    return [n for n in names if any(not np.array_equal(getattr(v, n), getattr(nominal, n)) for v in variants)]


#: MuJoCo Warp ``Model`` arrays that stay shared although a variant changes them, and why that does not matter.
IGNORED = {"dof_length": "read only by sleeping islands, which the task does not enable"}


def _model_fields() -> set[str]:
    """The ``Model`` arrays MuJoCo Warp reads while stepping this task."""
    _, mjw = _import_warp()
    return {f.name for f in dataclasses.fields(mjw.Model)} - set(IGNORED)


class WarpSim(MujocoSim):
    """N Go2 worlds in one MuJoCo Warp ``Data`` (implements :class:`~rlcore_tasks.go2.sim_interface.Simulator`).

    Attributes:
        wp_model, wp_data: the Warp model (per-world arrays for what the variants change) and data.
        batched: the ``Model`` fields given one row per world.
        unsupported: ``MjModel`` arrays the pool's variants change that MuJoCo Warp cannot vary per world (those
            variants run with the nominal values there).
        qpos, qvel, sensordata, time: ``[N, ...]`` float32 torch views of the Warp state.
    """

    def __init__(self, cfg: Go2Cfg, num_envs: int, terrain: Terrain, rng: np.random.Generator,
                 device: str | torch.device = "cpu") -> None:
        self._wp, self._mjw = _import_warp()
        super().__init__(cfg, num_envs, terrain, device, delay_dtype=torch.float32)
        wp, mjw = self._wp, self._mjw
        self._wp_device = "cpu" if self.device.type == "cpu" else f"cuda:{self.device.index or 0}"
        n, m = num_envs, self.model
        self.batched: list[str] = []
        self.unsupported: list[str] = []
        self.wp_model = None
        with wp.ScopedDevice(self._wp_device):
            self.wp_data = mjw.make_data(m, nworld=n, nconmax=cfg.sim.warp_nconmax, njmax=cfg.sim.warp_njmax)
        d = self.wp_data
        self.qpos, self.qvel = wp.to_torch(d.qpos), wp.to_torch(d.qvel)
        self.sensordata, self.time = wp.to_torch(d.sensordata), wp.to_torch(d.time)
        self._ctrl, self._warmstart = wp.to_torch(d.ctrl), wp.to_torch(d.qacc_warmstart)
        self._initial_qpos = torch.as_tensor(self._initial[self._qpos_cols], dtype=torch.float32, device=self.device)
        self._initial_qvel = torch.as_tensor(self._initial[self._qvel_cols], dtype=torch.float32, device=self.device)
        self.qpos[:], self.qvel[:], self.sensordata[:] = self._initial_qpos, self._initial_qvel, 0.0
        self.unstable = torch.zeros(n, dtype=torch.bool, device=self.device)
        # per batched field: its per-world view [N, ...] and the pool's rows [K, ...]
        self._tables: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        self._init_variants(rng)
        self.refresh()

    # -- domain randomisation -----------------------------------------------------------------------------------

    def _load_variants(self) -> None:
        """Build the Warp model with one row per world for every batchable field the pool changes, and keep each such
        field's per-variant rows ``[K, ...]`` on the device."""
        wp, mjw = self._wp, self._mjw
        changed = changed_fields(self.model, self.variants)
        batchable = set(batchable_fields())
        batched = [f for f in changed if f in batchable]
        # MjModel arrays MuJoCo Warp does not read (the CPU midphase's bvh_aabb, ...) do not matter
        unsupported = sorted(f for f in set(changed) - batchable if f in _model_fields())
        if unsupported and unsupported != self.unsupported:
            names = [p.name for p, v in zip(self.physical, self.variants)
                     if any(not np.array_equal(getattr(v, f), getattr(self.model, f)) for f in unsupported)]
            print(f"[go2 warp] MuJoCo Warp cannot vary {unsupported} per world: {len(names)} variant(s) "
                  f"({', '.join(names[:4])}{', ...' if len(names) > 4 else ''}) run with the nominal values there")
        self.unsupported = unsupported
        if self.wp_model is None or batched != self.batched:
            with wp.ScopedDevice(self._wp_device):
                self.wp_model = mjw.put_model(self.model, batch_sizes=dict.fromkeys(batched, self.num_envs))
            # MuJoCo stops its solver at iterations / ls_iterations silently; MuJoCo Warp would print a line per step
            self.wp_model.opt.warn_overflow &= ~(mjw.OverflowType.LS_ITERATIONS | mjw.OverflowType.ITERATIONS)
            self.batched = batched
            for f in batched:  # rows are copied as MjModel holds them: MuJoCo Warp must hold them alike
                view = wp.to_torch(getattr(self.wp_model, f))
                nominal = np.asarray(getattr(self.model, f), dtype=np.float64)
                if nominal.size != view[0].numel() or not np.allclose(
                        view[0].double().cpu().numpy().reshape(nominal.shape), nominal, rtol=1e-5, atol=1e-6):
                    raise NotImplementedError(f"MuJoCo Warp's Model.{f} is not MjModel's {f} (put_model transforms "
                                              f"it): this backend cannot randomise it")
        self._tables = {}
        for f in batched:
            view = wp.to_torch(getattr(self.wp_model, f))  # [N, ...], the Warp array itself
            rows = np.stack([np.asarray(getattr(v, f), dtype=np.float64) for v in self.variants])
            table = torch.as_tensor(rows, device=self.device).reshape(len(rows), *view.shape[1:]).to(view.dtype)
            self._tables[f] = (view, table)

    def _assign_models(self, env_ids: np.ndarray, variants: np.ndarray) -> None:
        ids = torch.as_tensor(env_ids, device=self.device)
        rows = torch.as_tensor(variants, device=self.device)
        for view, table in self._tables.values():
            view[ids] = table[rows]

    # -- stepping -------------------------------------------------------------------------------------------------

    def refresh(self) -> None:
        """The views are the Warp arrays themselves: only the slices are rebuilt."""
        self._state_views(self.qpos, self.qvel)
        self._sensor_views(self.sensordata)

    def _env_state(self, env_id: int) -> tuple[np.ndarray, np.ndarray]:
        return (self.qpos[env_id].double().cpu().numpy(), self.qvel[env_id].double().cpu().numpy())

    def step(self, joint_targets: torch.Tensor) -> None:
        """Advance every world ``decimation`` physics steps under the delayed PD targets ``[N, 12]``; flag and hold
        back worlds whose physics failed (``unstable``)."""
        targets = self.delay(torch.as_tensor(joint_targets).to(self.device, torch.float32))
        before_qpos, before_qvel = self.qpos.clone(), self.qvel.clone()
        speed = torch.zeros(self.num_envs, device=self.device)
        self._warmstart.zero_()  # as the rollout backend: each control step's solve starts cold
        with self._stream():
            for j in range(self.decimation):
                self._ctrl.copy_(targets[:, min(j, targets.shape[1] - 1)])  # [N, 1, 12] without latency
                self._mjw.step(self.wp_model, self.wp_data)
                speed = torch.maximum(speed, self.qvel.abs().amax(dim=1))  # NaN propagates
        finite = torch.isfinite(self.qpos).all(dim=1) & torch.isfinite(self.qvel).all(dim=1)
        self.unstable = unstable = ~(speed <= MAX_SPEED) | ~finite
        if bool(unstable.any()):
            bad_before = ~(torch.isfinite(before_qpos).all(dim=1) & (before_qvel.abs().amax(dim=1) <= MAX_SPEED))
            self.qpos[unstable] = torch.where(bad_before[unstable, None], self._initial_qpos, before_qpos[unstable])
            self.qvel[unstable] = torch.where(bad_before[unstable, None], self._initial_qvel, before_qvel[unstable])
            self.sensordata[unstable] = 0.0
        self.refresh()

    def _stream(self):
        """Warp launches on torch's current CUDA stream (so torch's writes and reads around them are ordered)."""
        wp = self._wp
        if self.device.type == "cuda":
            return wp.ScopedStream(wp.stream_from_torch(torch.cuda.current_stream(self.device)))
        return wp.ScopedDevice("cpu")

    def reset(self, env_ids: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        """Write ``qpos [k, 19]`` and ``qvel [k, 18]`` into worlds ``env_ids``; their sensor readings become zero."""
        ids = torch.as_tensor(env_ids, device=self.device)
        self.qpos[ids] = torch.as_tensor(qpos).to(self.device, torch.float32)
        self.qvel[ids] = torch.as_tensor(qvel).to(self.device, torch.float32)
        self.sensordata[ids] = 0.0
        self.refresh()

    def push(self, env_ids: torch.Tensor, lin_vel_xy: torch.Tensor) -> None:
        """Set the world-frame planar base velocity ``[k, 2]`` of worlds ``env_ids``."""
        self.qvel[torch.as_tensor(env_ids, device=self.device), :2] = torch.as_tensor(lin_vel_xy).to(
            self.device, torch.float32)
        self.refresh()

    # -- checkpoints ------------------------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The rollout backend's layout (``sim_state`` as ``mjSTATE_FULLPHYSICS`` in float64), so a run resumes on
        either backend."""
        state = torch.as_tensor(np.tile(self._initial, (self.num_envs, 1)))
        state[:, 0] = self.time.double().cpu()
        state[:, self._qpos_cols] = self.qpos.double().cpu()
        state[:, self._qvel_cols] = self.qvel.double().cpu()
        return {"sim_state": state, "sim_sensordata": self.sensordata.double().cpu(),
                "env_variant": self.env_variant.detach().cpu().clone(), **self.delay.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        full = torch.as_tensor(_numpy(state["sim_state"])).to(self.device, torch.float32)
        self.time[:] = full[:, 0]
        self.qpos[:], self.qvel[:] = full[:, self._qpos_cols], full[:, self._qvel_cols]
        self.sensordata[:] = torch.as_tensor(_numpy(state["sim_sensordata"])).to(self.device, torch.float32)
        self.set_variants(np.arange(self.num_envs), state["env_variant"])
        if "sim_target_history" in state:
            self.delay.load_state_dict(state)
        self.refresh()

    def close(self) -> None:
        self.wp_model = self.wp_data = None
        self._tables = {}
