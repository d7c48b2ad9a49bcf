"""Terrain for the Go2 task: a flat plane, a rough height field of difficulty tiles with a curriculum, or a course.

The rough terrain (legged_gym's layout) is a grid of ``num_levels x num_cols`` square tiles. Row ``l`` holds
difficulty ``l / (num_levels - 1)``; columns take the kinds of ``proportions`` (:data:`TILE_KINDS`): pyramid slopes
and rough slopes (alternately a hill and a pit), stairs that climb or descend walking out from the tile's centre,
random bumps and discrete obstacles. Each tile has a flat spawn platform at its centre. Each env lives on one tile
(``levels``, ``cols``); the MuJoCo envs are separate simulations, so robots never meet even when they share a tile.
Heights are kept as a torch grid ``[rows (y), cols (x)]`` in the same layout MuJoCo's height field uses, so the
height scan reads exactly the surface the robot stands on (same triangulation as MuJoCo's height field).

The curriculum (:meth:`Terrain.update_curriculum`, legged_gym's rule): at the end of an episode a robot that walked
more than half a tile from its spawn point goes one level up; one that covered less than half the distance its
commands asked for goes one level down; one that passes the hardest level is sent to a random level, so that
every level stays in use.

A ``course`` (``bench/rough_eval.py``) is one straight strip along +x: a flat start, one obstacle of a fixed size
(:func:`course_heights`), and a finish line every robot must cross.
"""

from __future__ import annotations

import math
import re

import numpy as np
import torch

from rlcore.env import ConfigError
from rlcore_tasks.go2.config import TerrainCfg

TERRAIN_TYPES = ("flat", "rough", "course")
TILE_KINDS = ("slope", "rough_slope", "stairs_up", "stairs_down", "random", "discrete")

#: Course geometry [m]: the strip's width (y), the start platform's length and the robots' start x on it.
COURSE_WIDTH, COURSE_START, COURSE_SPAWN_X = 8.0, 2.0, 1.0
#: Course names: flat, rough, stairs_up_<h>cm, stairs_down_<h>cm, slope_<a>deg.
COURSE_PATTERN = re.compile(r"^(flat|rough|stairs_up_(\d+)cm|stairs_down_(\d+)cm|slope_(\d+)deg)$")


class Terrain:
    """Height map, env origins and the level curriculum.

    Args:
        cfg: terrain settings.
        num_envs: number of envs N.
        device: torch device of every tensor.
        generator: torch generator for the initial levels and the curriculum's random re-spawns.
    """

    def __init__(self, cfg: TerrainCfg, num_envs: int, device: torch.device, generator: torch.Generator) -> None:
        if cfg.type not in TERRAIN_TYPES:
            raise ConfigError(f"terrain.type {cfg.type!r} is not one of {list(TERRAIN_TYPES)}")
        unknown = set(cfg.proportions) - set(TILE_KINDS)
        if unknown:
            raise ConfigError(f"terrain.proportions: unknown kinds {sorted(unknown)}; valid: {list(TILE_KINDS)}")
        self.cfg = cfg
        self.device = device
        self.generator = generator
        self.num_envs = num_envs
        self.is_flat = cfg.type == "flat"
        self.levels = torch.zeros(num_envs, dtype=torch.long, device=device)
        self.cols = torch.zeros(num_envs, dtype=torch.long, device=device)
        self.finish_x: float | None = None  # a course's finish line [m]
        self.border = 0.0  # width of the flat border around the tile grid [m]
        if self.is_flat:
            self.heights = torch.zeros(1, 1, device=device)
            self.hscale = 1.0
            self.num_levels = 1
            return
        self.hscale = cfg.horizontal_scale
        if cfg.type == "course":
            self.num_levels = 1
            self.heights_np, self.finish_x = course_heights(cfg.course, cfg.horizontal_scale)
        else:
            self.num_levels = cfg.num_levels
            b = int(round(cfg.border_size / cfg.horizontal_scale))
            self.border = b * cfg.horizontal_scale
            self.heights_np = np.pad(self._generate(cfg), b)  # float64 [rows (y), cols (x)], flat border around
            max_init = max(0, min(cfg.max_init_level, cfg.num_levels - 1))
            self.levels = torch.randint(0, max_init + 1, (num_envs,), generator=generator, device=device)
            self.cols = torch.arange(num_envs, device=device) % cfg.num_cols
        self.heights = torch.as_tensor(self.heights_np, dtype=torch.float32, device=device)

    # ------------------------------------------------------------------ generation (numpy, once)
    def tile_kinds(self) -> list[str]:
        """The kind of each column, in order."""
        weights = np.array([self.cfg.proportions.get(k, 0.0) for k in TILE_KINDS], dtype=np.float64)
        if weights.sum() <= 0:
            raise ConfigError("terrain.proportions: at least one kind needs a positive share")
        counts = np.floor(weights / weights.sum() * self.cfg.num_cols + 1e-9).astype(int)
        while counts.sum() < self.cfg.num_cols:  # hand the remainder to the largest shares
            counts[np.argmax(weights / weights.sum() * self.cfg.num_cols - counts)] += 1
        return [kind for kind, n in zip(TILE_KINDS, counts) for _ in range(n)]

    def difficulty_sizes(self, level: int) -> dict[str, float]:
        """What difficulty ``level`` means per kind: ``slope`` (rise over run), ``step`` [m], ``obstacle`` [m] and
        ``roughness`` [m] (the bumps' amplitude)."""
        c = self.cfg
        d = level / max(c.num_levels - 1, 1)
        return {"slope": math.tan(math.radians(c.max_slope_deg * d)),
                "step": c.min_step_height + (c.max_step_height - c.min_step_height) * d,
                "obstacle": c.min_obstacle_height + (c.max_obstacle_height - c.min_obstacle_height) * d,
                "roughness": c.max_roughness * max(d, 0.1)}

    def _generate(self, cfg: TerrainCfg) -> np.ndarray:
        rng = np.random.default_rng(cfg.seed)
        n = int(round(cfg.tile_size / cfg.horizontal_scale))  # cells per tile side
        rows, cols = cfg.num_cols * n + 1, cfg.num_levels * n + 1  # rows along y (columns), cols along x (levels)
        heights = np.zeros((rows, cols))
        coords = np.arange(n) * cfg.horizontal_scale - cfg.tile_size / 2  # the tile's vertices, centre vertex at 0
        dx, dy = np.meshgrid(coords, coords, indexing="xy")  # [y, x]
        ring = np.maximum(np.abs(dx), np.abs(dy))  # distance from the centre in the square (pyramid) metric
        half = cfg.platform_size / 2  # half-width of the flat spawn platform [m]
        outward = np.clip(ring - half, 0.0, None)  # distance walked out from the platform's edge
        kinds = self.tile_kinds()
        pit = [kinds[:col].count(kind) % 2 == 1 for col, kind in enumerate(kinds)]  # every other slope is a pit
        for level in range(cfg.num_levels):
            size = self.difficulty_sizes(level)
            for col, kind in enumerate(kinds):
                if kind in ("slope", "rough_slope"):
                    tile = (1.0 if pit[col] else -1.0) * size["slope"] * outward  # hill: centre high, edges low
                    if kind == "rough_slope":
                        tile = tile + rng.uniform(-1, 1, tile.shape) * size["roughness"] * 0.5
                elif kind in ("stairs_up", "stairs_down"):
                    steps = np.ceil(outward / cfg.step_width - 1e-6)  # step 1 rises just past the platform's edge
                    tile = (1.0 if kind == "stairs_up" else -1.0) * steps * size["step"]
                elif kind == "discrete":
                    tile = _obstacles(rng, dx, dy, cfg, size["obstacle"])
                else:  # random bumps on a coarse lattice (about 2 cells per bump)
                    amp = size["roughness"]
                    coarse = rng.uniform(-amp, amp, (n // 2 + 1, n // 2 + 1))
                    tile = np.kron(coarse, np.ones((2, 2)))[:n, :n]
                tile = np.where(ring <= half + 1e-9, 0.0, tile)  # a flat spawn platform at the ground's height 0
                heights[col * n : (col + 1) * n, level * n : (level + 1) * n] = tile
        return heights

    # ------------------------------------------------------------------ queries (torch)
    def origins(self, env_ids: torch.Tensor | None = None) -> torch.Tensor:
        """Spawn point (x, y, ground height) of each env's tile centre, ``[n, 3]``."""
        levels = self.levels if env_ids is None else self.levels[env_ids]
        cols = self.cols if env_ids is None else self.cols[env_ids]
        if self.is_flat:
            return torch.zeros(levels.shape[0], 3, device=self.device)
        if self.finish_x is not None:  # a course: every robot at the start, on the strip's centre line
            xy = torch.tensor([[COURSE_SPAWN_X, COURSE_WIDTH / 2]], device=self.device).expand(levels.shape[0], 2)
            return torch.cat([xy, self.height_at(xy).unsqueeze(-1)], dim=-1)
        x = self.border + (levels.float() + 0.5) * self.cfg.tile_size
        y = self.border + (cols.float() + 0.5) * self.cfg.tile_size
        xy = torch.stack([x, y], dim=-1)
        return torch.cat([xy, self.height_at(xy).unsqueeze(-1)], dim=-1)

    def height_at(self, xy: torch.Tensor) -> torch.Tensor:
        """Terrain height under world points ``xy [..., 2]``, shape ``[...]``.

        Interpolates exactly as MuJoCo triangulates a height field: each cell is split along its diagonal
        from ``(x0, y0)`` to ``(x0 + 1, y0 + 1)``, and the height is linear on each triangle. Points beyond
        the field take the height of its nearest edge.
        """
        if self.is_flat:
            return torch.zeros(xy.shape[:-1], device=xy.device)
        rows, cols = self.heights.shape
        gx = (xy[..., 0] / self.hscale).clamp(0, cols - 1)
        gy = (xy[..., 1] / self.hscale).clamp(0, rows - 1)
        x0 = gx.floor().long().clamp(0, cols - 2)
        y0 = gy.floor().long().clamp(0, rows - 2)
        fx, fy = gx - x0, gy - y0
        h = self.heights
        h00, h01 = h[y0, x0], h[y0, x0 + 1]
        h10, h11 = h[y0 + 1, x0], h[y0 + 1, x0 + 1]
        lower = h00 + fx * (h01 - h00) + fy * (h11 - h01)  # triangle (x0,y0) (x0+1,y0) (x0+1,y0+1): fx >= fy
        upper = h00 + fy * (h10 - h00) + fx * (h11 - h10)  # triangle (x0,y0) (x0,y0+1) (x0+1,y0+1): fx < fy
        return torch.where(fx >= fy, lower, upper)

    def hfield_geometry(self) -> tuple[np.ndarray, tuple[float, float, float, float], tuple[float, float, float]]:
        """MuJoCo height-field data (normalised to [0, 1]), its ``size`` and the geom position."""
        h = self.heights_np
        lo, hi = float(h.min()), float(h.max())
        span = max(hi - lo, 1e-3)
        rows, cols = h.shape
        half_x, half_y = (cols - 1) * self.hscale / 2, (rows - 1) * self.hscale / 2
        data = (h - lo) / span
        return data, (half_x, half_y, span, 1.0), (half_x, half_y, lo)

    def update_curriculum(self, env_ids: torch.Tensor, distance: torch.Tensor, commanded: torch.Tensor) -> None:
        """Promote envs that walked over half a tile, demote those that covered under half their command; those
        promoted past the hardest level go to a uniformly random level.

        Args:
            env_ids: envs being reset ``[n]``.
            distance: distance each walked from its spawn point this episode ``[n]`` [m].
            commanded: distance its commands asked for over the episode ``[n]`` [m].
        """
        if self.cfg.type != "rough" or not self.cfg.curriculum or env_ids.numel() == 0:
            return
        up = distance > self.cfg.tile_size / 2
        down = (distance < commanded * 0.5) & ~up
        levels = self.levels[env_ids] + up.long() - down.long()
        # Robots that master the hardest level are sent back to a random level, so all levels stay in use.
        mastered = levels >= self.num_levels
        random_levels = torch.randint(0, self.num_levels, levels.shape, generator=self.generator, device=self.device)
        levels = torch.where(mastered, random_levels, levels.clamp(min=0))
        self.levels[env_ids] = levels

    def mean_level(self) -> torch.Tensor:
        return self.levels.float().mean()


def _obstacles(rng: np.random.Generator, dx: np.ndarray, dy: np.ndarray, cfg: TerrainCfg, height: float) -> np.ndarray:
    """A tile of ``cfg.num_obstacles`` boxes (axis-aligned, sides in ``cfg.obstacle_size``), each raised or sunk by
    ``height`` or ``height / 2`` (legged_gym's discrete obstacles), on cell centres ``dx, dy`` [m]."""
    tile = np.zeros_like(dx)
    lim = cfg.tile_size / 2
    for _ in range(cfg.num_obstacles):
        w, d = rng.uniform(*cfg.obstacle_size, 2)
        cx, cy = rng.uniform(-lim, lim, 2)
        h = rng.choice([-height, -height / 2, height / 2, height])
        tile[(np.abs(dx - cx) <= w / 2) & (np.abs(dy - cy) <= d / 2)] = h
    return tile


def course_heights(name: str, hscale: float = 0.1) -> tuple[np.ndarray, float]:
    """The height field of evaluation course ``name`` and its finish line x [m].

    Every course is a strip ``COURSE_WIDTH`` wide along +x; robots start at x = ``COURSE_SPAWN_X`` on a flat
    ``COURSE_START`` m platform at height 0 (stairs down: at the top) and must cross the finish line:

    - ``flat``: 5 m of flat ground.
    - ``rough``: 5 m of random bumps, +-4 cm on a 0.2 m lattice (seed 0).
    - ``stairs_up_<h>cm`` / ``stairs_down_<h>cm``: 8 steps of h cm, 0.3 m deep, then a 2.6 m landing; the finish
      line is 0.6 m into the landing (stairs down: the platform is 8 h high, the landing at 0).
    - ``slope_<a>deg``: a 2 m ramp up at a degrees, a 1 m top, a 2 m ramp down, then flat; the finish is 0.5 m past
      the ramp's foot.

    Returns ``heights [rows (y), cols (x)]`` (vertex j at x = j * hscale) and the finish line's x.
    """
    match = COURSE_PATTERN.match(name)
    if match is None:
        raise ConfigError(f"terrain.course {name!r}: expected flat, rough, stairs_up_<cm>cm, stairs_down_<cm>cm or "
                          "slope_<deg>deg (e.g. stairs_up_13cm, slope_25deg)")
    s0 = COURSE_START
    if name in ("flat", "rough"):
        finish, length = s0 + 5.0, s0 + 7.0
    elif name.startswith("stairs"):
        finish, length = s0 + 8 * 0.3 + 0.6, s0 + 8 * 0.3 + 2.6
    else:
        finish, length = s0 + 5.5, s0 + 7.5
    x = np.arange(int(round(length / hscale)) + 1) * hscale  # vertex x [m]
    if name == "rough":
        coarse = np.random.default_rng(0).uniform(-0.04, 0.04, (int(COURSE_WIDTH / 0.2) + 2, x.size // 2 + 2))
        grid = np.kron(coarse, np.ones((2, 2)))[: int(round(COURSE_WIDTH / hscale)) + 1, : x.size]
        return np.where(x[None, :] >= s0, grid, 0.0), finish
    if name == "flat":
        profile = np.zeros_like(x)
    elif name.startswith("stairs"):
        step = int(match.group(2) or match.group(3)) / 100.0
        climbed = np.clip(np.floor((x - s0) / 0.3 + 1e-9) + 1, 0, 8) * step  # step k from s0 + 0.3 (k - 1)
        profile = climbed if name.startswith("stairs_up") else 8 * step - climbed
    else:
        rise = math.tan(math.radians(int(match.group(4))))
        up = np.clip(x - s0, 0.0, 2.0) * rise
        down = np.clip(x - (s0 + 3.0), 0.0, 2.0) * rise
        profile = up - down
    rows = int(round(COURSE_WIDTH / hscale)) + 1
    return np.repeat(profile[None, :], rows, axis=0), finish


def scan_points(x_range: list[float], y_range: list[float], resolution: float) -> torch.Tensor:
    """Grid of scan points in the base's yaw frame, ``[H (y), W (x), 2]``."""
    nx = int(round((x_range[1] - x_range[0]) / resolution)) + 1
    ny = int(round((y_range[1] - y_range[0]) / resolution)) + 1
    xs = torch.linspace(x_range[0], x_range[1], nx)
    ys = torch.linspace(y_range[0], y_range[1], ny)
    gy, gx = torch.meshgrid(ys, xs, indexing="ij")
    return torch.stack([gx, gy], dim=-1)


__all__ = ["COURSE_PATTERN", "TERRAIN_TYPES", "TILE_KINDS", "Terrain", "course_heights", "scan_points"]
