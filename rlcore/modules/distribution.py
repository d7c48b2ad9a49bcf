"""Output distributions of stochastic models.

A stochastic model's MLP produces a raw output of shape ``[B, *input_dim]``; a :class:`Distribution` turns it into a
distribution over ``A``-dimensional outputs (actions). The distribution owns everything specific to that choice: the
shape the MLP must produce, learnable parameters (e.g. a state-independent std), sampling, log-probabilities, entropy,
closed-form KL divergence between two parameter sets, the deterministic output used for deployment, and the MLP
last-layer initialisation that makes the initial distribution sensible.

All reductions over the action dimension are sums, so ``log_prob``, ``entropy`` and ``kl_divergence`` return ``[B]``.
The math is written out in closed form (no ``torch.distributions`` objects in the hot path) so that it is cheap, free of
global validation side effects, and differentiable with respect to the MLP output and the distribution parameters.
"""

from __future__ import annotations

import importlib
import inspect
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from rlcore.errors import ConfigError

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_STD_TYPES = ("scalar", "log")


class Distribution(nn.Module):
    """Base class of output distributions.

    Usage from a model::

        dist = GaussianDistribution(A)
        mlp = MLP(in_dim, dist.input_dim, ...)   # the MLP reshapes its output to ``[B, *dist.input_dim]``
        dist.init_mlp_weights(mlp)
        dist.update(mlp(x))                      # set the current distribution
        actions = dist.sample()                  # [B, A]
        log_p = dist.log_prob(actions)           # [B]
    """

    def __init__(self, output_dim: int) -> None:
        """Initialize the distribution.

        Args:
            output_dim: Dimension ``A`` of the output (action) space.
        """
        super().__init__()
        if int(output_dim) <= 0:
            raise ConfigError(f"output_dim must be positive, got {output_dim}.")
        self.output_dim = int(output_dim)

    @property
    def input_dim(self) -> int | list[int]:
        """Shape of the raw MLP output per sample: ``A`` or ``[2, A]``."""
        raise NotImplementedError

    def update(self, mlp_output: torch.Tensor) -> None:
        """Set the current distribution from the raw MLP output ``[B, *input_dim]``."""
        raise NotImplementedError

    def sample(self) -> torch.Tensor:
        """Draw a sample ``[B, A]`` from the current distribution (no gradient, uses torch's global RNG)."""
        raise NotImplementedError

    def deterministic_output(self, mlp_output: torch.Tensor) -> torch.Tensor:
        """Deterministic output ``[B, A]`` (the mean) computed directly from the raw MLP output, for deployment."""
        raise NotImplementedError

    def as_deterministic_output_module(self) -> nn.Module:
        """Return a small module computing :meth:`deterministic_output`, scriptable and ONNX-exportable."""
        raise NotImplementedError

    @property
    def mean(self) -> torch.Tensor:
        """Mean ``[B, A]`` of the current distribution."""
        raise NotImplementedError

    @property
    def std(self) -> torch.Tensor:
        """Standard deviation ``[B, A]`` of the current distribution."""
        raise NotImplementedError

    @property
    def entropy(self) -> torch.Tensor:
        """Entropy ``[B]`` of the current distribution, summed over the action dimension."""
        raise NotImplementedError

    @property
    def params(self) -> tuple[torch.Tensor, ...]:
        """Tensors ``([B, A], ...)`` that fully define the current distribution; stored in rollouts for the KL."""
        raise NotImplementedError

    def log_prob(self, outputs: torch.Tensor) -> torch.Tensor:
        """Log-probability ``[B]`` of ``outputs`` ``[B, A]`` under the current distribution, summed over actions."""
        raise NotImplementedError

    def kl_divergence(self, old_params: tuple[torch.Tensor, ...], new_params: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """Closed-form ``KL(old || new)`` ``[B]`` between two parameter tuples (as :attr:`params`), summed over actions.

        It does not depend on the current distribution set by :meth:`update`.
        """
        raise NotImplementedError

    def init_mlp_weights(self, mlp: nn.Module) -> None:
        """Initialise the MLP's last layer for this distribution (no-op by default)."""

    def set_std_max(self, std_max: float | None) -> None:
        """Lower the clamp ceiling of the std to ``std_max`` (None: the configured one). Gaussian distributions only."""
        raise ConfigError(f"{type(self).__name__} has no std to cap; std_max_schedule needs a Gaussian distribution.")

    def scale_std(self, scale: torch.Tensor) -> None:
        """Multiply the current distribution's std by ``scale`` (``[B, 1]`` or ``[B, A]``, per sample; no gradient
        through it): the exploration schedule's per-env std factor (``low_noise_fraction``). Gaussian distributions
        only."""
        raise ConfigError(f"{type(self).__name__} has no std to scale; a per-env exploration scale "
                          f"(low_noise_fraction) needs a Gaussian distribution.")

    def _check_updated(self, value: torch.Tensor | None) -> torch.Tensor:
        """Return ``value`` or fail clearly when :meth:`update` has not been called yet."""
        if value is None:
            raise RuntimeError(f"{type(self).__name__}: call update(mlp_output) before using the distribution.")
        return value


def _last_linear(mlp: nn.Module) -> nn.Linear:
    """Return the last ``nn.Linear`` of ``mlp`` (found by iterating its modules in reverse)."""
    for module in reversed(list(mlp.modules())):
        if isinstance(module, nn.Linear):
            return module
    raise ValueError(f"No nn.Linear layer found in {type(mlp).__name__}.")


def _resolve_std_range(std_range: tuple[float, float]) -> tuple[float, float]:
    """Validate ``(min, max)`` std bounds; the minimum is raised to 1e-6 so that log(std) stays finite."""
    low, high = float(std_range[0]), float(std_range[1])
    low = max(low, 1e-6)
    if not high >= low:
        raise ConfigError(f"Invalid std_range {tuple(std_range)}: need 0 < min <= max.")
    return low, high


def _check_std_type(std_type: str) -> None:
    if std_type not in _STD_TYPES:
        raise ConfigError(f"Unknown std_type '{std_type}'. Valid options: {', '.join(repr(t) for t in _STD_TYPES)}.")


def _normal_log_prob(x: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """Element-wise log N(x; mean, std)."""
    return -0.5 * ((x - mean) / std) ** 2 - torch.log(std) - _LOG_SQRT_2PI


def _normal_kl(m0: torch.Tensor, s0: torch.Tensor, m1: torch.Tensor, s1: torch.Tensor) -> torch.Tensor:
    """Element-wise KL(N(m0, s0) || N(m1, s1))."""
    var_ratio = (s0 / s1) ** 2
    return 0.5 * (var_ratio + ((m0 - m1) / s1) ** 2 - 1.0 - torch.log(var_ratio))


class GaussianDistribution(Distribution):
    """Diagonal Gaussian with a state-independent (learnable) standard deviation.

    The MLP outputs the mean ``[B, A]`` directly. The std is a parameter of shape ``[A]``: ``std_param`` for
    ``std_type="scalar"`` or ``log_std_param`` (storing log(std)) for ``std_type="log"``. It is clamped to ``std_range``
    (in log space for the log type). ``init_std`` and ``std_range`` are always given in std (not log) space.
    """

    def __init__(
        self,
        output_dim: int,
        init_std: float = 1.0,
        std_range: tuple[float, float] = (1e-6, 1e6),
        std_type: str = "scalar",
        learn_std: bool = True,
    ) -> None:
        """Initialize the Gaussian distribution.

        Args:
            output_dim: Dimension ``A`` of the output space.
            init_std: Initial standard deviation (must be positive).
            std_range: ``(min, max)`` clamp range of the standard deviation.
            std_type: Parameterisation of the std parameter: ``"scalar"`` or ``"log"``.
            learn_std: Whether the std parameter is trained; if False it stays at ``init_std``.
        """
        super().__init__(output_dim)
        _check_std_type(std_type)
        if not init_std > 0:
            raise ConfigError(f"init_std must be positive, got {init_std}.")
        self.std_type = std_type
        self.init_std = float(init_std)
        self.std_range = _resolve_std_range(std_range)
        self._configured_std_range = self.std_range  # set_std_max lowers std_range's ceiling below this, never above
        self.log_std_range = (math.log(self.std_range[0]), math.log(self.std_range[1]))
        if std_type == "scalar":
            self.std_param = nn.Parameter(torch.full((self.output_dim,), self.init_std), requires_grad=learn_std)
        else:
            self.log_std_param = nn.Parameter(
                torch.full((self.output_dim,), math.log(self.init_std)), requires_grad=learn_std
            )
        self._mean: torch.Tensor | None = None
        self._std: torch.Tensor | None = None

    @property
    def input_dim(self) -> int:
        """The MLP outputs the mean directly: ``A``."""
        return self.output_dim

    def current_std(self) -> torch.Tensor:
        """Clamped standard deviation ``[A]`` given by the std parameter."""
        if self.std_type == "scalar":
            return self.std_param.clamp(*self.std_range)
        return self.log_std_param.clamp(*self.log_std_range).exp()

    def update(self, mlp_output: torch.Tensor) -> None:
        """Set mean = ``mlp_output`` ``[B, A]`` and broadcast the state-independent std to ``[B, A]``."""
        self._mean = mlp_output
        self._std = self.current_std().to(mlp_output.dtype).expand_as(mlp_output)

    def set_std_max(self, std_max: float | None) -> None:
        """Lower the std's clamp ceiling to ``std_max`` (never above the configured ``std_range``; None: back to it).

        A ceiling below the learned std caps the exploration noise (the parameter itself is kept; the clamp passes
        no gradient to it while the ceiling binds). The exploration schedule's ``std_max_schedule`` sets it every
        iteration.
        """
        low, high = self._configured_std_range
        high = high if std_max is None else min(high, max(float(std_max), low))
        self.std_range = (low, high)
        self.log_std_range = (math.log(low), math.log(high))

    def scale_std(self, scale: torch.Tensor) -> None:
        """std <- std * ``scale`` for the current distribution (the parameters themselves are unchanged)."""
        self._std = self.std * scale.to(self.std.dtype)

    def sample(self) -> torch.Tensor:
        """Sample ``[B, A]`` from N(mean, std)."""
        with torch.no_grad():
            return torch.normal(self.mean, self.std)

    def deterministic_output(self, mlp_output: torch.Tensor) -> torch.Tensor:
        """The mean is the MLP output itself."""
        return mlp_output

    def as_deterministic_output_module(self) -> nn.Module:
        """Identity module."""
        return _IdentityOutput()

    @property
    def mean(self) -> torch.Tensor:
        return self._check_updated(self._mean)

    @property
    def std(self) -> torch.Tensor:
        return self._check_updated(self._std)

    @property
    def entropy(self) -> torch.Tensor:
        return (0.5 + _LOG_SQRT_2PI + torch.log(self.std)).sum(dim=-1)

    @property
    def params(self) -> tuple[torch.Tensor, ...]:
        """``(mean [B, A], std [B, A])``."""
        return (self.mean, self.std)

    def log_prob(self, outputs: torch.Tensor) -> torch.Tensor:
        return _normal_log_prob(outputs, self.mean, self.std).sum(dim=-1)

    def kl_divergence(self, old_params: tuple[torch.Tensor, ...], new_params: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """Closed-form KL between diagonal Gaussians given ``(mean, std)`` tuples."""
        (old_mean, old_std), (new_mean, new_std) = old_params, new_params
        return _normal_kl(old_mean, old_std, new_mean, new_std).sum(dim=-1)


class HeteroscedasticGaussianDistribution(GaussianDistribution):
    """Diagonal Gaussian whose standard deviation is state-dependent (produced by the MLP).

    The MLP outputs ``[B, 2, A]``: ``[..., 0, :]`` is the mean and ``[..., 1, :]`` is the std (``std_type="scalar"``,
    used as is after clamping to ``std_range``) or log(std) (``std_type="log"``, clamped in log space, then
    exponentiated). With a flat last Linear layer of ``2 * A`` outputs reshaped row-major, the first ``A`` outputs are
    the mean and the next ``A`` the std head. There are no learnable parameters in this module.
    """

    def __init__(
        self,
        output_dim: int,
        init_std: float = 1.0,
        std_range: tuple[float, float] = (1e-6, 1e6),
        std_type: str = "scalar",
    ) -> None:
        """Initialize the heteroscedastic Gaussian distribution.

        Args:
            output_dim: Dimension ``A`` of the output space.
            init_std: Initial standard deviation, set through :meth:`init_mlp_weights` (must be positive).
            std_range: ``(min, max)`` clamp range of the standard deviation.
            std_type: Meaning of the std head output: ``"scalar"`` (std) or ``"log"`` (log std).
        """
        # Deliberately skip GaussianDistribution.__init__: no std parameter is needed here.
        Distribution.__init__(self, output_dim)
        _check_std_type(std_type)
        if not init_std > 0:
            raise ConfigError(f"init_std must be positive, got {init_std}.")
        self.std_type = std_type
        self.init_std = float(init_std)
        self.std_range = _resolve_std_range(std_range)
        self._configured_std_range = self.std_range  # set_std_max lowers std_range's ceiling below this, never above
        self.log_std_range = (math.log(self.std_range[0]), math.log(self.std_range[1]))
        self._mean = None
        self._std = None

    @property
    def input_dim(self) -> list[int]:
        """The MLP outputs ``[2, A]``: mean and (log) std."""
        return [2, self.output_dim]

    def update(self, mlp_output: torch.Tensor) -> None:
        """Split ``mlp_output`` ``[B, 2, A]`` into the mean and the clamped std."""
        mean, raw_std = mlp_output.unbind(dim=-2)
        if self.std_type == "scalar":
            std = raw_std.clamp(*self.std_range)
        else:
            std = raw_std.clamp(*self.log_std_range).exp()
        self._mean, self._std = mean, std

    def deterministic_output(self, mlp_output: torch.Tensor) -> torch.Tensor:
        """The mean, i.e. ``mlp_output[..., 0, :]``."""
        return mlp_output[..., 0, :]

    def as_deterministic_output_module(self) -> nn.Module:
        """Module selecting ``mlp_output[..., 0, :]``."""
        return _FirstSliceOutput()

    def init_mlp_weights(self, mlp: nn.Module) -> None:
        """Make the initial std equal ``init_std`` for every input.

        The std rows (``A:2A``) of the last Linear layer get zero weights and a bias of ``init_std`` (scalar) or
        ``log(init_std)`` (log), so the std head is input-independent at initialisation but still trainable.
        """
        layer = _last_linear(mlp)
        if layer.out_features != 2 * self.output_dim or layer.bias is None:
            raise ConfigError(
                f"{type(self).__name__} needs a last nn.Linear with bias and out_features={2 * self.output_dim}, "
                f"got out_features={layer.out_features}, bias={layer.bias is not None}."
            )
        bias = self.init_std if self.std_type == "scalar" else math.log(self.init_std)
        with torch.no_grad():
            layer.weight[self.output_dim :].zero_()
            layer.bias[self.output_dim :].fill_(bias)


def _beta_concentrations(mlp_output: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Map raw ``[B, 2, A]`` outputs to ``alpha, beta = softplus(raw) + 1`` (> 1, so the Beta is unimodal)."""
    alpha_raw, beta_raw = mlp_output.unbind(dim=-2)
    return F.softplus(alpha_raw) + 1.0, F.softplus(beta_raw) + 1.0


def _log_beta_fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """log B(a, b) = lgamma(a) + lgamma(b) - lgamma(a + b)."""
    return torch.lgamma(a) + torch.lgamma(b) - torch.lgamma(a + b)


class BetaDistribution(Distribution):
    """Beta distribution for bounded outputs, affinely mapped from ``(0, 1)`` to ``action_range``.

    The MLP outputs ``[B, 2, A]``: ``[..., 0, :]`` are raw alpha and ``[..., 1, :]`` raw beta values, mapped through
    ``softplus + 1``. A sample ``x ~ Beta(alpha, beta)`` becomes ``low + (high - low) * x``. ``log_prob`` and
    ``entropy`` are those of the mapped distribution (change of variables: ``-log(high - low)`` per dimension in the
    log-density, ``+log(high - low)`` in the entropy). ``params`` are ``(alpha, beta)``; the affine map cancels in the KL.
    """

    def __init__(
        self,
        output_dim: int,
        action_range: tuple[float, float] = (-1.0, 1.0),
        eps: float = 1e-6,
    ) -> None:
        """Initialize the Beta distribution.

        Args:
            output_dim: Dimension ``A`` of the output space.
            action_range: ``(low, high)`` interval the Beta support ``(0, 1)`` is mapped to.
            eps: Outputs are clamped to ``[eps, 1 - eps]`` in unit space in :meth:`log_prob` to keep it finite.
        """
        super().__init__(output_dim)
        low, high = float(action_range[0]), float(action_range[1])
        if not high > low:
            raise ConfigError(f"Invalid action_range {tuple(action_range)}: need low < high.")
        if not 0.0 <= eps < 0.5:
            raise ConfigError(f"eps must be in [0, 0.5), got {eps}.")
        self.action_range = (low, high)
        self.eps = float(eps)
        self._scale = high - low
        self._offset = low
        self._log_scale = math.log(self._scale)
        self._alpha: torch.Tensor | None = None
        self._beta: torch.Tensor | None = None

    @property
    def input_dim(self) -> list[int]:
        """The MLP outputs ``[2, A]``: raw alpha and raw beta."""
        return [2, self.output_dim]

    def update(self, mlp_output: torch.Tensor) -> None:
        """Compute ``alpha, beta`` ``[B, A]`` from the raw MLP output ``[B, 2, A]``."""
        self._alpha, self._beta = _beta_concentrations(mlp_output)

    def sample(self) -> torch.Tensor:
        """Sample ``[B, A]`` in ``action_range``."""
        with torch.no_grad():
            x = torch.distributions.Beta(self.params[0], self.params[1], validate_args=False).sample()
            return x * self._scale + self._offset

    def deterministic_output(self, mlp_output: torch.Tensor) -> torch.Tensor:
        """The mapped Beta mean computed from the raw MLP output."""
        alpha, beta = _beta_concentrations(mlp_output)
        return alpha / (alpha + beta) * self._scale + self._offset

    def as_deterministic_output_module(self) -> nn.Module:
        """Module computing the mapped Beta mean from the raw MLP output."""
        return _BetaMeanOutput(self._scale, self._offset)

    @property
    def mean(self) -> torch.Tensor:
        alpha, beta = self.params
        return alpha / (alpha + beta) * self._scale + self._offset

    @property
    def std(self) -> torch.Tensor:
        alpha, beta = self.params
        total = alpha + beta
        return torch.sqrt(alpha * beta / (total**2 * (total + 1.0))) * self._scale

    @property
    def entropy(self) -> torch.Tensor:
        alpha, beta = self.params
        total = alpha + beta
        ent = (
            _log_beta_fn(alpha, beta)
            - (alpha - 1.0) * torch.digamma(alpha)
            - (beta - 1.0) * torch.digamma(beta)
            + (total - 2.0) * torch.digamma(total)
        )
        return (ent + self._log_scale).sum(dim=-1)

    @property
    def params(self) -> tuple[torch.Tensor, ...]:
        """``(alpha [B, A], beta [B, A])``, both > 1."""
        return (self._check_updated(self._alpha), self._check_updated(self._beta))

    def log_prob(self, outputs: torch.Tensor) -> torch.Tensor:
        """Log-density of ``outputs`` in ``action_range`` (mapped to unit space, clamped to ``[eps, 1 - eps]``)."""
        alpha, beta = self.params
        x = ((outputs - self._offset) / self._scale).clamp(self.eps, 1.0 - self.eps)
        log_p = (alpha - 1.0) * torch.log(x) + (beta - 1.0) * torch.log1p(-x) - _log_beta_fn(alpha, beta)
        return (log_p - self._log_scale).sum(dim=-1)

    def kl_divergence(self, old_params: tuple[torch.Tensor, ...], new_params: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """Closed-form KL between Beta distributions given ``(alpha, beta)`` tuples."""
        (a0, b0), (a1, b1) = old_params, new_params
        kl = (
            _log_beta_fn(a1, b1)
            - _log_beta_fn(a0, b0)
            + (a0 - a1) * torch.digamma(a0)
            + (b0 - b1) * torch.digamma(b0)
            + (a1 - a0 + b1 - b0) * torch.digamma(a0 + b0)
        )
        return kl.sum(dim=-1)

    def init_mlp_weights(self, mlp: nn.Module) -> None:
        """Start near ``alpha = beta`` so the initial mean is the middle of ``action_range``.

        The last Linear layer gets zero bias and weights scaled down by 100, so both heads output ~0, i.e.
        ``alpha ~= beta ~= softplus(0) + 1`` (a broad, symmetric Beta), while keeping gradients flowing to all layers.
        """
        layer = _last_linear(mlp)
        if layer.out_features != 2 * self.output_dim:
            raise ConfigError(
                f"{type(self).__name__} needs a last nn.Linear with out_features={2 * self.output_dim}, "
                f"got {layer.out_features}."
            )
        with torch.no_grad():
            layer.weight.mul_(0.01)
            if layer.bias is not None:
                layer.bias.zero_()


class _IdentityOutput(nn.Module):
    """Deterministic output of :class:`GaussianDistribution`: the MLP output itself."""

    def forward(self, mlp_output: torch.Tensor) -> torch.Tensor:
        return mlp_output


class _FirstSliceOutput(nn.Module):
    """Deterministic output of :class:`HeteroscedasticGaussianDistribution`: ``mlp_output[..., 0, :]``."""

    def forward(self, mlp_output: torch.Tensor) -> torch.Tensor:
        return mlp_output[..., 0, :]


class _BetaMeanOutput(nn.Module):
    """Deterministic output of :class:`BetaDistribution`: the Beta mean mapped to the output range."""

    def __init__(self, scale: float, offset: float) -> None:
        super().__init__()
        self.scale = scale
        self.offset = offset

    def forward(self, mlp_output: torch.Tensor) -> torch.Tensor:
        alpha = F.softplus(mlp_output[..., 0, :]) + 1.0
        beta = F.softplus(mlp_output[..., 1, :]) + 1.0
        return alpha / (alpha + beta) * self.scale + self.offset


DISTRIBUTIONS: dict[str, type[Distribution]] = {
    "GaussianDistribution": GaussianDistribution,
    "HeteroscedasticGaussianDistribution": HeteroscedasticGaussianDistribution,
    "BetaDistribution": BetaDistribution,
}
"""Built-in distributions by class name."""

_ALIASES: dict[str, str] = {
    "gaussian": "GaussianDistribution",
    "heteroscedastic_gaussian": "HeteroscedasticGaussianDistribution",
    "beta": "BetaDistribution",
}


def _resolve_distribution_class(name: str | type) -> type[Distribution]:
    """Resolve a class, a built-in name, a short alias (case-insensitive) or ``"module.path:ClassName"``."""
    if isinstance(name, type):
        cls = name
    elif not isinstance(name, str):
        raise ConfigError(f"Distribution class_name must be a string or a class, got {type(name).__name__}.")
    elif ":" in name:
        module_path, attr = name.rsplit(":", 1)
        cls = importlib.import_module(module_path)
        for part in attr.split("."):
            cls = getattr(cls, part)
    else:
        lookup = {key.lower(): value for key, value in DISTRIBUTIONS.items()}
        lookup.update({alias: DISTRIBUTIONS[target] for alias, target in _ALIASES.items()})
        if name.lower() not in lookup:
            valid = ", ".join(list(DISTRIBUTIONS) + list(_ALIASES))
            raise ConfigError(f"Unknown distribution '{name}'. Valid names: {valid}.")
        cls = lookup[name.lower()]
    if not (isinstance(cls, type) and issubclass(cls, Distribution)):
        raise ConfigError(f"'{name}' does not resolve to a Distribution subclass.")
    return cls


def resolve_distribution(cfg: dict | None, output_dim: int) -> Distribution | None:
    """Build a distribution from a config dict such as ``{"class_name": "GaussianDistribution", "init_std": 1.0}``.

    ``class_name`` may be a built-in class name, a short alias (``"gaussian"``, ``"heteroscedastic_gaussian"``,
    ``"beta"``; case-insensitive), ``"module.path:ClassName"`` for custom distributions, or a class. The other keys are
    keyword arguments of the constructor. The config is not modified.

    Args:
        cfg: Distribution config, or None for a deterministic model.
        output_dim: Dimension ``A`` of the output space.

    Returns:
        The distribution, or None if ``cfg`` is None.

    Raises:
        ValueError: Missing or unknown ``class_name``.
        TypeError: A key is not an argument of the distribution's constructor.
    """
    if cfg is None:
        return None
    kwargs = dict(cfg)
    if "class_name" not in kwargs:
        raise ConfigError(f"Distribution config needs a 'class_name' key, got keys {sorted(kwargs)}.")
    cls = _resolve_distribution_class(kwargs.pop("class_name"))
    params = inspect.signature(cls.__init__).parameters
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        valid = [k for k, p in params.items() if k not in ("self", "output_dim") and p.kind is not p.VAR_POSITIONAL]
        unknown = [k for k in kwargs if k not in valid]
        if unknown:
            raise ConfigError(f"Unknown argument(s) {unknown} for {cls.__name__}. Valid arguments: {valid}.")
    return cls(output_dim, **kwargs)
