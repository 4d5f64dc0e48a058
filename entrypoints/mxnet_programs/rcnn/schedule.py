"""The learning rate: step decay by epoch times a linear warmup over the first iterations of the run."""


def learning_rate(base_lr, epoch, iteration, steps_per_epoch, decay_epochs, decay, warmup, warmup_factor):
    """lr at (epoch from 0, iteration within it): base_lr x decay per decay epoch reached, warmed up
    linearly from warmup_factor over the first `warmup` global iterations."""
    lr = base_lr * decay ** sum(1 for e in decay_epochs if epoch >= e)
    global_iter = epoch * steps_per_epoch + iteration
    if warmup and global_iter < warmup:
        alpha = global_iter / warmup
        lr *= warmup_factor * (1 - alpha) + alpha
    return lr
