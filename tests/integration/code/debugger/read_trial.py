"""Run in the image: what smdebug's trial API reads from a tensors directory, as JSON on the last line.

usage: python read_trial.py DIR [TENSOR ...]   for each TENSOR, its steps (TRAIN mode) and whether its value changed
"""

import json
import sys

from smdebug.core.modes import ModeKeys
from smdebug.trials import create_trial

trial = create_trial(sys.argv[1])
found = {"workers": sorted(trial.workers()), "names": sorted(trial.tensor_names()),
         "train_steps": trial.steps(mode=ModeKeys.TRAIN), "eval_steps": trial.steps(mode=ModeKeys.EVAL),
         "tensors": {}}
for name in sys.argv[2:]:
    tensor = trial.tensor(name)
    steps = tensor.steps(mode=ModeKeys.TRAIN)
    values = [tensor.value(step, mode=ModeKeys.TRAIN, worker=found["workers"][0]) for step in steps]
    found["tensors"][name] = {"steps": steps, "changed": any((v != values[0]).any() for v in values[1:]),
                              "workers": sorted(tensor.workers(steps[0], mode=ModeKeys.TRAIN)) if steps else []}
print(json.dumps(found))
