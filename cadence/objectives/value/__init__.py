"""Value estimators: TD(0), TD(1), TD(lambda) and GAE, as modules and as functions.

Examples:
    >>> import torch
    >>> from cadence.objectives.value import vec_generalized_advantage_estimate
    >>> zeros = torch.zeros(1, 2, 1)
    >>> advantage, _ = vec_generalized_advantage_estimate(1.0, 1.0, zeros, zeros, torch.ones(1, 2, 1), zeros.bool())
    >>> advantage.flatten().tolist()
    [2.0, 1.0]
"""

from cadence.objectives.value.estimators import GAE, TD0Estimator, TD1Estimator, TDLambdaEstimator, ValueEstimatorBase
from cadence.objectives.value.functional import (
    generalized_advantage_estimate,
    td0_advantage_estimate,
    td0_return_estimate,
    td1_advantage_estimate,
    td1_return_estimate,
    td_lambda_advantage_estimate,
    td_lambda_return_estimate,
    vec_generalized_advantage_estimate,
    vec_td1_advantage_estimate,
    vec_td1_return_estimate,
    vec_td_lambda_advantage_estimate,
    vec_td_lambda_return_estimate,
)

__all__ = [
    "GAE",
    "TD0Estimator",
    "TD1Estimator",
    "TDLambdaEstimator",
    "ValueEstimatorBase",
    "generalized_advantage_estimate",
    "td0_advantage_estimate",
    "td0_return_estimate",
    "td1_advantage_estimate",
    "td1_return_estimate",
    "td_lambda_advantage_estimate",
    "td_lambda_return_estimate",
    "vec_generalized_advantage_estimate",
    "vec_td1_advantage_estimate",
    "vec_td1_return_estimate",
    "vec_td_lambda_advantage_estimate",
    "vec_td_lambda_return_estimate",
]
