"""The batched MuJoCo simulation behind the Go2 task: the CPU backend of :class:`~rlcore_tasks.go2.sim_interface.Simulator`.

One compiled scene (robot + plane or height field), ``num_variants`` physical copies of it for domain
randomisation (:mod:`rlcore_tasks.go2.randomization`: joints, actuators, contacts, masses, latency, ground), and
MuJoCo's threaded rollout API stepping all N environments ``decimation`` physics steps in one C call per
control step. The full physics state of every env lives in one float64 array ``state [N, nstate]`` whose
qpos / qvel columns are numpy views (``qpos``, ``qvel``).

Each env applies its variant's actuation latency (whole physics steps) and every step checks the physics:
an env whose state became non-finite, exploded, or was reset by MuJoCo is flagged in ``unstable`` and kept
at its last good state, so no garbage ever reaches observations or rewards (the task ends its episode).

The task sees the simulator only through :class:`~rlcore_tasks.go2.sim_interface.Simulator` (torch tensors on the task
device): the float64 numpy state is converted once per mutating call (step, reset, push) into the ``float32``
state views, and targets, reset states and pushes are converted back at the same boundary. The numpy arrays
(``state``, ``qpos``, ``qvel``, ``sensordata``, ``ctrl``, ``latency``), ``model``, ``variants`` and
:meth:`Go2Sim.rollout` are this backend's own: tests, benchmarks and the viewer may use them, the MDP does not
(after writing them directly, call :meth:`Go2Sim.refresh`).
"""

from __future__ import annotations

import os
from pathlib import Path

import mujoco
import numpy as np
import torch
from mujoco import rollout

from rlcore.env import ConfigError
from rlcore_tasks.go2.config import Go2Cfg
from rlcore_tasks.go2.randomization import (
    JOINT_NAMES,
    LEGS,
    Variant,
    apply_variant,
    latency_steps,
    physical_features,
    sample_variant,
)
from rlcore_tasks.go2.terrain import Terrain

ASSET = Path(__file__).parent / "assets" / "go2.xml"
FEET = tuple(f"{leg}_foot_touch" for leg in LEGS)
COLLISION_ZONES = tuple(f"{leg}_{part}_touch" for part in ("thigh", "calf") for leg in LEGS)


def available_threads() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def build_model(cfg: Go2Cfg, terrain: Terrain) -> mujoco.MjModel:
    """Compile the scene: the robot of ``assets/go2.xml`` on a plane or on the terrain's height field."""
    model = build_spec(cfg, terrain).compile()
    scale_view(model)
    return model


def build_spec(cfg: Go2Cfg, terrain: Terrain) -> mujoco.MjSpec:
    """The scene before compilation (model variants edit it: :mod:`rlcore_tasks.go2.variants`)."""
    spec = mujoco.MjSpec.from_file(str(ASSET))
    spec.option.timestep = cfg.sim.dt
    spec.option.iterations = cfg.sim.solver_iterations
    spec.option.ls_iterations = cfg.sim.solver_ls_iterations
    integrators = {"euler": "mjINT_EULER", "implicitfast": "mjINT_IMPLICITFAST", "implicit": "mjINT_IMPLICIT",
                   "rk4": "mjINT_RK4"}
    cones = {"pyramidal": "mjCONE_PYRAMIDAL", "elliptic": "mjCONE_ELLIPTIC"}
    if cfg.sim.integrator not in integrators or cfg.sim.cone not in cones:
        raise ConfigError(f"go2.sim: integrator {cfg.sim.integrator!r} / cone {cfg.sim.cone!r}; use one of "
                          f"{sorted(integrators)} / {sorted(cones)}")
    if cfg.sim.render_quality not in ("fast", "full"):
        raise ConfigError(f"go2.sim.render_quality: {cfg.sim.render_quality!r}; use one of ['fast', 'full']")
    spec.option.integrator = getattr(mujoco.mjtIntegrator, integrators[cfg.sim.integrator])
    spec.option.cone = getattr(mujoco.mjtCone, cones[cfg.sim.cone])
    spec.option.impratio = cfg.sim.impratio
    world = spec.worldbody
    if terrain.is_flat:
        world.add_geom(name="ground", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0, 0, 0.05],
                       contype=1, conaffinity=0, condim=3, friction=[1.0, 0.005, 0.0001], rgba=[0.5, 0.55, 0.6, 1])
    else:
        data, size, pos = terrain.hfield_geometry()
        rows, cols = data.shape
        spec.add_hfield(name="terrain", size=list(size), nrow=rows, ncol=cols, userdata=data.ravel().tolist())
        world.add_geom(name="ground", type=mujoco.mjtGeom.mjGEOM_HFIELD, hfieldname="terrain", pos=list(pos),
                       contype=1, conaffinity=0, condim=3, friction=[1.0, 0.005, 0.0001], rgba=[0.5, 0.55, 0.6, 1])
    add_scenery(spec, spec.geom("ground"))
    return spec


def add_scenery(spec: mujoco.MjSpec, ground: mujoco.MjsGeom) -> None:
    """What videos show besides the robot: a checker floor (0.5 m squares, a grid line every metre), a sky with a
    hazy horizon, a light that follows the robot (its shadow on the ground) and the ``track`` camera looking at the
    robot from 2.1 m (front-right, 20 degrees down; it follows the centre of mass and keeps its orientation, so the
    floor moves past).

    Visual only: textures, a material, a light and a camera change no physics (the ground's contact settings are
    untouched; tests compare stepped states bit for bit).
    """
    vis = spec.visual
    vis.global_.offwidth, vis.global_.offheight = 1280, 720
    vis.headlight.ambient, vis.headlight.diffuse, vis.headlight.specular = [0.3] * 3, [0.5] * 3, [0.0] * 3
    vis.map.haze = 0.4
    vis.quality.shadowsize = 1024  # over VIEW["shadow_radius"]: 2 mm texels; MuJoCo's 4096 costs 3x in software GL
    vis.rgba.haze = vis.rgba.fog = [0.78, 0.85, 0.93, 1.0]
    spec.add_texture(name="sky", type=mujoco.mjtTexture.mjTEXTURE_SKYBOX, builtin=mujoco.mjtBuiltin.mjBUILTIN_GRADIENT,
                     rgb1=[0.45, 0.62, 0.85], rgb2=[0.95, 0.97, 1.0], width=256, height=1536)
    spec.add_texture(name="floor", type=mujoco.mjtTexture.mjTEXTURE_2D, builtin=mujoco.mjtBuiltin.mjBUILTIN_CHECKER,
                     mark=mujoco.mjtMark.mjMARK_EDGE, rgb1=[0.36, 0.42, 0.48], rgb2=[0.30, 0.35, 0.41],
                     markrgb=[0.85, 0.88, 0.9], width=256, height=256)
    floor = spec.add_material(name="floor", texrepeat=[1, 1], texuniform=True)
    floor.textures[mujoco.mjtTextureRole.mjTEXROLE_RGB] = "floor"
    ground.material = "floor"
    ground.rgba = [1.0, 1.0, 1.0, 1.0]  # the material's colours
    world = spec.worldbody
    world.add_light(name="sun", mode=mujoco.mjtCamLight.mjCAMLIGHT_TRACKCOM, pos=[0.0, 0.0, 3.0],
                    dir=[0.08, -0.05, -1.0], type=mujoco.mjtLightType.mjLIGHT_DIRECTIONAL, castshadow=True,
                    diffuse=[0.6, 0.6, 0.6], specular=[0.2, 0.2, 0.2], ambient=[0.1, 0.1, 0.1])
    base = spec.body("base").pos  # the camera's offset from the robot is set at the model's initial pose
    offset = np.array([1.4, -1.4, 0.0])
    offset[2] = np.linalg.norm(offset) * np.tan(np.radians(20.0))
    forward = -offset / np.linalg.norm(offset)
    right = np.cross(forward, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    up = np.cross(right, forward)
    world.add_camera(name="track", mode=mujoco.mjtCamLight.mjCAMLIGHT_TRACKCOM, pos=list(np.asarray(base) + offset),
                     xyaxes=[*right, *up])


#: [m] what the video camera sees: near and far clipping, fog (the far floor fades into the sky's colour) and the
#: radius around the light that casts shadows
VIEW = {"znear": 0.05, "zfar": 200.0, "fogstart": 10.0, "fogend": 60.0, "shadow_radius": 1.0}


def scale_view(model: mujoco.MjModel) -> None:
    """Set the view distances of :data:`VIEW` in metres (MuJoCo reads them as multiples of ``stat.extent``, which is
    0.66 m on the plane and about 100 m with the rough height field). Visual settings only."""
    extent = float(model.stat.extent)
    model.vis.map.znear, model.vis.map.zfar = VIEW["znear"] / extent, VIEW["zfar"] / extent
    model.vis.map.fogstart, model.vis.map.fogend = VIEW["fogstart"] / extent, VIEW["fogend"] / extent
    model.vis.map.shadowclip = VIEW["shadow_radius"] / extent


#: [m/s or rad/s] any qvel entry above this is a physics failure, not motion (Go2 joints: <= 30 rad/s).
MAX_SPEED = 100.0


def _numpy(x, dtype=None) -> np.ndarray:
    """A torch tensor (any device) or array-like as a numpy array."""
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().numpy()
    return np.asarray(x, dtype=dtype)


def draw_variant_pool(cfg: Go2Cfg, rng: np.random.Generator, nominal: mujoco.MjModel) -> list[Variant]:
    """The ``cfg.domain_rand.num_variants`` physical variants a run trains on: the first ``nominal_fraction`` of the
    pool the nominal robot, the last ``loaded_fraction`` loaded robots, draws from the config's ranges between (at
    strength ``(i + 1) / K`` for variant ``i`` under a randomisation curriculum)."""
    k = max(1, int(cfg.domain_rand.num_variants))
    graded = cfg.domain_rand.curriculum_steps > 0  # variant i at strength (i + 1) / k
    fraction = float(cfg.domain_rand.loaded_fraction)
    if not 0.0 <= fraction <= 1.0:
        raise ConfigError(f"go2.domain_rand.loaded_fraction: {fraction} must lie in [0, 1]")
    first_loaded = k - round(k * fraction)  # the pool's last variants are loaded robots
    nominal_fraction = float(cfg.domain_rand.nominal_fraction)
    num_nominal = round(k * nominal_fraction)  # and its first ones the nominal robot
    if not 0.0 <= nominal_fraction <= 1.0 or num_nominal > first_loaded:
        raise ConfigError(f"go2.domain_rand.nominal_fraction: {nominal_fraction} must lie in [0, 1] and leave "
                          f"room for loaded_fraction {fraction} ({num_nominal} + {k - first_loaded} of "
                          f"{k} variants)")
    return [Variant(name=f"nominal_{i}") if i < num_nominal else
            sample_variant(cfg.domain_rand, rng, cfg.sim.dt, strength=(i + 1) / k if graded else 1.0,
                           name=f"{'loaded' if i >= first_loaded else 'drawn'}_{i}", nominal=nominal,
                           loaded=i >= first_loaded) for i in range(k)]


class TargetDelay:
    """Actuation latency: each env applies its PD targets a whole number of physics steps late.

    With a latency of ``k`` physics steps, the target given at control step ``t`` is applied from physics step
    ``t * decimation + k`` on: physics step ``j`` of a control step applies the target given
    ``ceil((k - j) / decimation)`` control steps ago (0: this one). A fresh env (after :meth:`set_latency`, i.e.
    a reset) has no past: its first target counts as given since ever. Torch tensors on any device, so a device
    backend keeps the pipeline on the device.

    Attributes:
        latency: ``[N]`` int64, each env's latency in physics steps.
        history: ``[N, H, nu]`` the targets of this and the ``H - 1`` previous control steps (newest first).
        fresh: ``[N]`` bool, envs whose next target fills their whole history.
    """

    def __init__(self, num_envs: int, decimation: int, nu: int, dtype: torch.dtype, device: torch.device) -> None:
        self.decimation = decimation
        self.latency = torch.zeros(num_envs, dtype=torch.long, device=device)
        self.history = torch.zeros(num_envs, 1, nu, dtype=dtype, device=device)
        self.fresh = torch.ones(num_envs, dtype=torch.bool, device=device)
        self._rows = torch.arange(num_envs, device=device)[:, None]
        self._substeps = torch.arange(decimation, device=device)[None, :]

    def set_latency(self, env_ids: torch.Tensor, steps: torch.Tensor) -> None:
        """Envs ``env_ids [k]`` get latencies ``steps [k]`` (physics steps); their pending targets are dropped."""
        self.latency[env_ids] = steps
        self.fresh[env_ids] = True
        depth = 1 + int(-(-int(self.latency.max()) // self.decimation))
        if depth > self.history.shape[1]:
            pad = self.history[:, -1:].expand(-1, depth - self.history.shape[1], -1)
            self.history = torch.cat([self.history, pad], dim=1)

    def __call__(self, targets: torch.Tensor) -> torch.Tensor:
        """Record this control step's ``targets [N, nu]``; return the targets per physics step ``[N, decimation, nu]``."""
        if self.history.shape[1] == 1:  # no env has a latency: nothing to remember
            self.fresh[:] = False
            return targets[:, None, :]
        self.history = torch.roll(self.history, 1, dims=1)
        self.history[:, 0] = targets
        self.history = torch.where(self.fresh[:, None, None], targets[:, None, :], self.history)
        self.fresh[:] = False
        back = torch.clamp(-torch.div(self._substeps - self.latency[:, None], self.decimation, rounding_mode="floor"),
                           min=0)  # ceil((k - j) / D)
        return self.history[self._rows, back]

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The targets given but not yet applied (CPU copies), as checkpoints store them."""
        return {"sim_target_history": self.history.detach().cpu().clone(),
                "sim_fresh": self.fresh.detach().cpu().clone()}

    def load_state_dict(self, state: dict) -> None:
        self.history = torch.as_tensor(state["sim_target_history"]).to(self.history.device, self.history.dtype).clone()
        self.fresh[:] = torch.as_tensor(state["sim_fresh"]).to(self.fresh.device)


class MujocoSim:
    """What every MuJoCo backend of the Go2 shares: the compiled nominal model, its sensor and joint addresses, the
    pool of physical variants and their compiled models, the actuation latency, the full-physics state layout
    (checkpoints store that layout, so a run resumes on either backend), heights, solver settings and rendering.

    Subclasses (:class:`Go2Sim`, :class:`~rlcore_tasks.go2.sim_warp.WarpSim`) own the batched state and the
    stepping; they implement :meth:`_assign_models` (envs switch compiled variants) and :meth:`_env_state` (one
    env's ``qpos``, ``qvel`` as float64 numpy, for rendering), and call :meth:`_init_variants` once they can.
    """

    def __init__(self, cfg: Go2Cfg, num_envs: int, terrain: Terrain, device: str | torch.device,
                 delay_dtype: torch.dtype = torch.float64) -> None:
        self.cfg = cfg
        self.num_envs = num_envs
        self.device = torch.device(device)
        self.terrain = terrain
        self.model = m = build_model(cfg, terrain)
        self.decimation = int(cfg.sim.decimation)
        # State layout of mjSTATE_FULLPHYSICS: time, qpos, qvel, ... (offsets computed, not assumed).
        self.nstate = mujoco.mj_stateSize(m, mujoco.mjtState.mjSTATE_FULLPHYSICS)
        qpos_start = mujoco.mj_stateSize(m, mujoco.mjtState.mjSTATE_TIME)
        qvel_start = mujoco.mj_stateSize(m, mujoco.mjtState.mjSTATE_TIME | mujoco.mjtState.mjSTATE_QPOS)
        self._qpos_cols = slice(qpos_start, qpos_start + m.nq)
        self._qvel_cols = slice(qvel_start, qvel_start + m.nv)
        data = mujoco.MjData(m)
        mujoco.mj_resetData(m, data)
        self._initial = np.empty(self.nstate)  # the model's initial state: where an env with a bad state restarts
        mujoco.mj_getState(m, data, self._initial, mujoco.mjtState.mjSTATE_FULLPHYSICS)
        self._init_robot_constants()
        self.delay = TargetDelay(num_envs, self.decimation, m.nu, delay_dtype, self.device)
        self.env_variant = torch.zeros(num_envs, dtype=torch.long, device=self.device)
        self._renderer: mujoco.Renderer | None = None

    def _init_variants(self, rng: np.random.Generator) -> None:
        """Draw the config's variant pool and put every env on variant 0."""
        self.set_physical_variants(draw_variant_pool(self.cfg, rng, self.model))

    def _init_robot_constants(self) -> None:
        """Sensor columns, joint addresses and limits, body and geom ids of the nominal model."""
        m = self.model

        def sensor_cols(names: tuple[str, ...]) -> np.ndarray:
            return np.array([m.sensor_adr[m.sensor(name).id] for name in names])

        self.foot_sensor = sensor_cols(FEET)
        self.collision_sensor = sensor_cols(COLLISION_ZONES)
        self.base_sensor = sensor_cols(("base_touch",))
        self.torque_sensor = sensor_cols(tuple(f"{j.removesuffix('_joint')}_torque" for j in JOINT_NAMES))
        self.joint_qpos = np.array([m.jnt_qposadr[m.joint(j).id] for j in JOINT_NAMES])
        self.joint_range = self._tensor(np.array([m.jnt_range[m.joint(j).id] for j in JOINT_NAMES]))
        self._torque_limit = np.array([m.actuator_forcerange[m.actuator(j.removesuffix("_joint")).id, 1]
                                       for j in JOINT_NAMES])
        self.torque_limit = self._tensor(self._torque_limit)
        self.base_body = m.body("base").id
        self.ground_geom = m.geom("ground").id

    def _tensor(self, x) -> torch.Tensor:
        return torch.as_tensor(np.asarray(x)).to(self.device, torch.float32)

    def _sensor_views(self, sensors: torch.Tensor) -> None:
        """The sensor state views from ``sensors [N, nsensordata]`` (float32, on the device)."""
        self.joint_torque = sensors[:, self.torque_sensor]
        self.foot_forces = sensors[:, self.foot_sensor]
        self.collision_forces = sensors[:, self.collision_sensor]
        self.base_contact_force = sensors[:, self.base_sensor[0]]

    def _state_views(self, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        """The body and joint state views from ``qpos [N, 19]`` and ``qvel [N, 18]`` (float32, on the device)."""
        self.root_pos, self.root_quat, self.joint_pos = qpos[:, :3], qpos[:, 3:7], qpos[:, 7:19]
        # A free joint's qvel: linear velocity in the world frame, angular velocity in the body frame.
        self.root_lin_vel, self.root_ang_vel, self.joint_vel = qvel[:, :3], qvel[:, 3:6], qvel[:, 6:18]

    @property
    def num_variants(self) -> int:
        return len(self.physical)

    @property
    def latency(self) -> torch.Tensor:
        """``[N]`` int64, each env's actuation latency in physics steps."""
        return self.delay.latency

    def set_physical_variants(self, physical: list[Variant]) -> None:
        """Replace the pool of variants (their models compiled here); every env then simulates variant 0."""
        c = self.cfg.control
        self.physical = list(physical)
        self.variants = [apply_variant(self.model, v, c.kp, c.kd) for v in self.physical]
        self.variant_latency = np.array([latency_steps(v, self.cfg.sim.dt) for v in self.physical], dtype=np.int64)
        self._load_variants()
        self.set_variants(np.arange(self.num_envs), np.zeros(self.num_envs, dtype=np.int64))

    def _load_variants(self) -> None:
        """Hook: the pool ``variants`` changed (a device backend uploads it)."""

    def set_variants(self, env_ids, variants) -> None:
        """Assign physical variants to envs (at reset); each env takes its variant's latency (tensors or arrays)."""
        env_ids, variants = _numpy(env_ids, np.int64), _numpy(variants, np.int64)
        self.env_variant[torch.from_numpy(env_ids).to(self.device)] = torch.from_numpy(variants).to(self.device)
        self._assign_models(env_ids, variants)
        self.set_latency(env_ids, self.variant_latency[variants])

    def _assign_models(self, env_ids: np.ndarray, variants: np.ndarray) -> None:
        raise NotImplementedError

    def set_latency(self, env_ids, steps) -> None:
        """Give envs ``env_ids`` a latency of ``steps`` physics steps each; their next target counts as given
        since ever (no past targets are replayed after a reset)."""
        ids = torch.as_tensor(_numpy(env_ids, np.int64), device=self.device)
        self.delay.set_latency(ids, torch.as_tensor(_numpy(steps, np.int64), device=self.device))

    def variant_features(self) -> torch.Tensor:
        """``[K, 17]`` :func:`~rlcore_tasks.go2.randomization.physical_features` of every variant."""
        rows = [physical_features(v, self.model) for v in self.physical]
        return self._tensor(np.stack(rows) if rows else np.zeros((0, 17)))

    def heights(self, xy: torch.Tensor) -> torch.Tensor:
        """Ground height under world points ``xy [..., 2]`` (the terrain the height field was built from)."""
        return self.terrain.height_at(xy)

    def solver_options(self) -> dict:
        """Exact torque limits and the solver settings of the nominal model, as plain Python values."""
        opt = self.model.opt
        return {"torque_limits": [float(x) for x in self._torque_limit],
                "solver": {"integrator": mujoco.mjtIntegrator(opt.integrator).name,
                           "cone": mujoco.mjtCone(opt.cone).name, "iterations": int(opt.iterations),
                           "ls_iterations": int(opt.ls_iterations), "impratio": float(opt.impratio)}}

    def _env_state(self, env_id: int) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def render(self, env_id: int, width: int, height: int, fast: bool) -> np.ndarray:
        """An RGB frame ``[height, width, 3]`` uint8 of env ``env_id`` from the ``track`` camera.

        Needs an OpenGL context: on a machine without a display set ``MUJOCO_GL=egl`` (or ``osmesa``)
        before the first ``import mujoco``.
        """
        if self._renderer is None or self._renderer_size != (width, height):
            if fast:
                self.model.vis.quality.offsamples = 0  # no multisampling (read when the context is made)
            self._renderer = mujoco.Renderer(self.model, height=height, width=width)
            self._renderer_size = (width, height)
            self._render_data = mujoco.MjData(self.model)
        data = self._render_data
        data.qpos[:], data.qvel[:] = self._env_state(env_id)
        mujoco.mj_forward(self.model, data)
        self._renderer.update_scene(data, camera="track")
        self._renderer.scene.flags[mujoco.mjtRndFlag.mjRND_FOG] = True
        if fast:
            self._renderer.scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = False
        return self._renderer.render().copy()


class Go2Sim(MujocoSim):
    """N Go2 environments stepped together on the CPU by MuJoCo's threaded rollout (implements
    :class:`~rlcore_tasks.go2.sim_interface.Simulator`; config ``sim.backend: rollout``, the default).

    The torch members of the protocol (state views, ``unstable``, ``env_variant``, ``joint_range``,
    ``torque_limit``) are on ``device``. The numpy attributes below are this backend's own.

    Attributes:
        model: the nominal compiled model (the task's robot, no randomisation).
        physical: ``num_variants`` :class:`~rlcore_tasks.go2.randomization.Variant` s drawn from ``cfg.domain_rand``.
        variants: their compiled models (:func:`~rlcore_tasks.go2.randomization.apply_variant`).
        env_variant: ``[N]`` int64 tensor, the variant each env currently simulates.
        latency: ``[N]`` int64 tensor, each env's actuation latency in physics steps (its variant's, or
            :meth:`set_latency`).
        unstable: ``[N]`` bool tensor, set by the last :meth:`step` where the physics failed at any of its physics steps:
            MuJoCo could not integrate (it then resets that env to the model's initial state, which shows as the
            clock jumping back), the state is not finite, or a speed exceeds :data:`MAX_SPEED` (no Go2 moves that
            fast; the first sign of a diverging solver). Such an env keeps its state from before the step (the
            model's initial state if that one was already bad), so its observations stay finite.
        state: ``[N, nstate]`` float64 full physics state; ``qpos [N, 19]`` and ``qvel [N, 18]`` are views.
        sensordata: ``[N, nsensor]`` sensor readings at the last physics step of the last control step (zeros for
            an unstable env).
    """

    def __init__(self, cfg: Go2Cfg, num_envs: int, terrain: Terrain, rng: np.random.Generator,
                 device: str | torch.device = "cpu") -> None:
        super().__init__(cfg, num_envs, terrain, device)
        n, m = num_envs, self.model
        self.nthread = int(cfg.sim.threads or available_threads())
        self.state = np.tile(self._initial, (n, 1))
        self.qpos = self.state[:, self._qpos_cols]
        self.qvel = self.state[:, self._qvel_cols]
        self.sensordata = np.zeros((n, m.nsensordata))
        self._state_out = np.zeros((n, self.decimation, self.nstate))
        self._sensor_out = np.zeros((n, self.decimation, m.nsensordata))
        self.ctrl = np.zeros((n, self.decimation, m.nu))
        self.unstable = torch.zeros(n, dtype=torch.bool, device=self.device)
        self._models: list[mujoco.MjModel] = [m] * n
        # Domain randomisation: K physical variants; envs pick one at every reset.
        self._init_variants(rng)
        self._datas = [mujoco.MjData(m) for _ in range(max(1, self.nthread))]
        self._pool = rollout.Rollout(nthread=self.nthread if self.nthread > 1 else 0)
        self.refresh()

    def refresh(self) -> None:
        """Convert the float64 numpy state into the torch state views (one conversion per array)."""
        self._state_views(self._tensor(self.qpos), self._tensor(self.qvel))
        self._sensor_views(self._tensor(self.sensordata))

    def _assign_models(self, env_ids: np.ndarray, variants: np.ndarray) -> None:
        for e, v in zip(env_ids.tolist(), variants.tolist()):
            self._models[e] = self.variants[v]

    def _env_state(self, env_id: int) -> tuple[np.ndarray, np.ndarray]:
        return self.qpos[env_id], self.qvel[env_id]

    def delayed_targets(self, joint_targets: np.ndarray) -> np.ndarray:
        """Record this control step's targets ``[N, 12]``; return the targets per physics step ``[N, decimation, 12]``
        (:class:`TargetDelay`)."""
        return self.delay(torch.from_numpy(np.ascontiguousarray(joint_targets, dtype=np.float64))).numpy()

    def step(self, joint_targets) -> None:
        """Advance every env by ``decimation`` physics steps towards the PD targets ``[N, 12]`` (a tensor or an
        array; each env's latency applied); flag and hold back envs whose physics failed (``unstable``)."""
        self._physics_step(_numpy(joint_targets, np.float64))
        self.refresh()

    def _physics_step(self, joint_targets: np.ndarray) -> None:
        self.ctrl[:] = self.delayed_targets(joint_targets)
        clock = self.state[:, 0] + self.decimation * self.model.opt.timestep  # mjSTATE_FULLPHYSICS starts with time
        self.rollout()
        final = self._state_out[:, -1]
        speeds = np.abs(self._state_out[:, :, self._qvel_cols]).max(axis=(1, 2))  # NaN stays NaN
        unstable = ~(speeds <= MAX_SPEED) | ~np.isfinite(final).all(axis=1)
        unstable |= np.abs(final[:, 0] - clock) > 1e-9  # MuJoCo reset the env: its clock jumped back
        self.unstable = torch.from_numpy(unstable).to(self.device)
        if unstable.any():
            ok = ~unstable
            self.state[ok] = final[ok]
            self.sensordata[ok] = self._sensor_out[ok, -1]
            self.sensordata[unstable] = 0.0
            held = self.state[unstable]  # their pre-step states; one that was itself bad becomes the initial state
            bad = ~np.isfinite(held).all(axis=1) | ~(np.abs(held[:, self._qvel_cols]).max(axis=1) <= MAX_SPEED)
            if bad.any():
                self.state[np.flatnonzero(unstable)[bad]] = self._initial
        else:
            self.state[:] = final
            self.sensordata[:] = self._sensor_out[:, -1]

    def rollout(self) -> None:
        """The one threaded MuJoCo call of a step: every env ``decimation`` physics steps from ``state`` under
        ``ctrl [N, decimation, 12]``, into ``_state_out`` and ``_sensor_out`` (``state`` itself is not updated)."""
        self._pool.rollout(self._models, self._datas, self.state, self.ctrl, control_spec=mujoco.mjtState.mjSTATE_CTRL.value,
                           skip_checks=True, nstep=self.decimation, initial_warmstart=None,
                           state=self._state_out, sensordata=self._sensor_out, chunk_size=None)

    def reset(self, env_ids: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        """Write ``qpos [k, 19]`` and ``qvel [k, 18]`` into envs ``env_ids``; their sensor readings become zero."""
        ids = _numpy(env_ids, np.int64)
        self.qpos[ids] = _numpy(qpos, np.float64)
        self.qvel[ids] = _numpy(qvel, np.float64)
        self.sensordata[ids] = 0.0
        self.refresh()

    def push(self, env_ids: torch.Tensor, lin_vel_xy: torch.Tensor) -> None:
        """Set the world-frame planar base velocity ``[k, 2]`` of envs ``env_ids``."""
        self.qvel[_numpy(env_ids, np.int64), :2] = _numpy(lin_vel_xy, np.float64)
        self.refresh()

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Physics state, sensor readings, variant assignment and the latency pipeline (CPU tensors, copies)."""
        return {"sim_state": torch.from_numpy(self.state.copy()),
                "sim_sensordata": torch.from_numpy(self.sensordata.copy()),
                "env_variant": self.env_variant.detach().cpu().clone(), **self.delay.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict`'s entries (the target history only where ``state`` has one)."""
        self.state[:] = _numpy(state["sim_state"])
        self.sensordata[:] = _numpy(state["sim_sensordata"])
        self.set_variants(np.arange(self.num_envs), state["env_variant"])
        if "sim_target_history" in state:  # the latency pipeline: targets given but not yet applied
            self.delay.load_state_dict(state)
        self.refresh()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None
