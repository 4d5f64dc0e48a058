"""The best epoch's weights kept beside the checkpoints too, not only in the model directory: SageMaker restarts a
job (Spot capacity reclaimed, a retried job) with /opt/ml/checkpoints restored from S3 but an empty /opt/ml/model, and
the job's end exports the best epoch's network (model_files.export). Rank 0's, standard library only.

A copy is named by the epochs done when it was the best, `<model>-best-epoch-NNNN.params`, like the checkpoints; one
is removed once no retained checkpoint's state names its epoch and it is not the current best, so that the checkpoint
a restart resumes from (the newest complete one) always finds its own.
"""

import os
import re
import shutil

from mxnet_programs.files import atomic_save, remove_quietly


class BestCopies:
    """Rank 0's copies of `net_name`'s best weights in `checkpoint_dir`."""

    def __init__(self, checkpoint_dir, net_name):
        self.checkpoint_dir, self.net_name = checkpoint_dir, net_name
        self.pattern = re.compile(rf"^{re.escape(net_name)}-best-epoch-(\d{{4,}})\.params$")

    def path(self, epoch):
        """The copy of epoch `epoch`'s weights (0-based: epoch 0 is `-best-epoch-0001`)."""
        return os.path.join(self.checkpoint_dir, f"{self.net_name}-best-epoch-{epoch + 1:04d}.params")

    def keep(self, net, epoch):
        """A copy of the network's weights, the best so far at `epoch`."""
        atomic_save(self.path(epoch), net.save_parameters)

    def prune(self, epochs_in_use):
        """Removes the copies of the epochs not in `epochs_in_use` (the retained checkpoints' best epochs and the
        current best)."""
        try:
            names = os.listdir(self.checkpoint_dir)
        except FileNotFoundError:
            return
        for name in names:
            found = self.pattern.match(name)
            if found and int(found.group(1)) - 1 not in epochs_in_use:
                remove_quietly(os.path.join(self.checkpoint_dir, name))

    def restore(self, model_path, epoch):
        """Puts epoch `epoch`'s copy at `model_path` (the model directory's best weights) when there is one. Returns
        whether `model_path` holds the best weights: from the copy, or left there by the run that stopped (the same
        container)."""
        copy = self.path(epoch)
        if os.path.isfile(copy):
            atomic_save(model_path, lambda target: shutil.copyfile(copy, target))
            return True
        return os.path.isfile(model_path)
