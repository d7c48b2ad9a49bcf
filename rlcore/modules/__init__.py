"""Network building blocks: MLP, CNN, RNN, normalisers, output distributions."""

from rlcore.modules.activation import ACTIVATIONS, resolve_activation
from rlcore.modules.cnn import CNN
from rlcore.modules.distribution import (
    BetaDistribution,
    Distribution,
    GaussianDistribution,
    HeteroscedasticGaussianDistribution,
    resolve_distribution,
)
from rlcore.modules.mlp import MLP
from rlcore.modules.normalization import EmpiricalDiscountedVariationNormalization, EmpiricalNormalization
from rlcore.modules.rnn import RNN, HiddenState

__all__ = [
    "ACTIVATIONS",
    "CNN",
    "MLP",
    "RNN",
    "BetaDistribution",
    "Distribution",
    "EmpiricalDiscountedVariationNormalization",
    "EmpiricalNormalization",
    "GaussianDistribution",
    "HeteroscedasticGaussianDistribution",
    "HiddenState",
    "resolve_activation",
    "resolve_distribution",
]
