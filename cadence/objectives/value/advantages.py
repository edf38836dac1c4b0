"""The value estimators under the reference's module path
(``torchrl.objectives.value.advantages``): ``from cadence.objectives.value.advantages
import GAE`` imports the same classes as ``cadence.objectives.value``.

Examples:
    >>> from cadence.objectives.value import GAE as gae
    >>> GAE is gae
    True
"""

from cadence.objectives.value.estimators import GAE, TD0Estimator, TD1Estimator, TDLambdaEstimator, ValueEstimatorBase

__all__ = ["GAE", "TD0Estimator", "TD1Estimator", "TDLambdaEstimator", "ValueEstimatorBase"]
