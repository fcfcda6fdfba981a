"""The gradient checker: is a hand-written backward right?

    numerical.py    central differences and the relative error (the maths)
    layer_check.py  check_layer: every input and parameter of one layer
    tiny_models.py  tiny_model, randomise_params: what the checks run on
    report.py       run_report: every layer and the whole model, as a table

``minitrans gradcheck`` prints the report; the lessons and the tests import
from here.
"""

from minitrans.gradcheck.layer_check import TensorCheck, check_layer
from minitrans.gradcheck.numerical import (TOLERANCE, central_derivative, numeric_gradient,
                                           relative_error)
from minitrans.gradcheck.report import format_table, layer_cases, run_report
from minitrans.gradcheck.tiny_models import (ModelWithLoss, SublayerWithAddNorm, randomise_params,
                                             tiny_model)

__all__ = ["TOLERANCE", "ModelWithLoss", "SublayerWithAddNorm", "TensorCheck", "central_derivative",
           "check_layer", "format_table", "layer_cases", "numeric_gradient", "randomise_params",
           "relative_error", "run_report", "tiny_model"]
