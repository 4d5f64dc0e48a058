"""Which images each rank trains and validates on, and GluonCV's datasets on our checked annotations.

All ranks run the same number of iterations per epoch (else a gradient allreduce would wait forever):
each epoch the train images are permuted with a seed shared by all ranks and rank r of a shard takes
every count-th image from position r; iterations = images per rank // per-rank batch. A ShardedByS3Key
channel is split by local rank (channel_sharding) and the smallest host part sets the iterations.
"""

import contextlib
import io
import os


def steps_per_epoch(num_items, world_size, per_rank_batch, cap=0):
    steps = (num_items // world_size) // per_rank_batch
    return min(steps, cap) if cap else steps


def epoch_batches(np, num_items, aspect_ratios, seed, epoch, rank, world_size, per_rank_batch, steps,
                  bucket_batches=32):
    """This rank's `steps` batches (lists of dataset indexes) of an epoch.

    One permutation per epoch, the same on every rank (seeded by seed and epoch), rank r takes
    positions r, r + size, ...: disjoint shards, each image once per epoch at most. Inside buckets of
    `bucket_batches` batches the images are sorted by aspect ratio (less padding, as GluonCV's
    SplitSortedBucketSampler), then the batch order is shuffled.
    """
    rng = np.random.default_rng([seed & 0xFFFFFFFF, epoch])
    mine = rng.permutation(num_items)[rank::world_size][:steps * per_rank_batch]
    batches = []
    bucket = per_rank_batch * bucket_batches
    for begin in range(0, len(mine), bucket):
        chunk = sorted(mine[begin:begin + bucket].tolist(), key=lambda i: aspect_ratios[i])
        batches.extend(chunk[k:k + per_rank_batch] for k in range(0, len(chunk), per_rank_batch))
    order = np.random.default_rng([seed & 0xFFFFFFFF, epoch, rank]).permutation(len(batches))
    return [batches[i] for i in order]


def val_shard(num_items, rank, world_size):
    """Contiguous [start, end) of the validation images for a rank (sizes differ by at most one)."""
    base, rest = divmod(num_items, world_size)
    start = base * rank + min(rank, rest)
    return start, start + base + (1 if rank < rest else 0)


class ListBatchSampler:
    """A DataLoader batch sampler over precomputed batches."""

    def __init__(self, batches):
        self._batches = batches

    def __iter__(self):
        return iter(self._batches)

    def __len__(self):
        return len(self._batches)


def make_datasets(model, train, val, gdata):
    """GluonCV COCODetection / COCOInstance subclasses on already-parsed annotations (inputs.ChannelData),
    with image paths from <channel>/<split>/<file_name> (GluonCV 0.10 derives them from ``coco_url``, which
    custom data often lacks), and the train file's categories as the classes, in its order, for both sets
    (GluonCV's COCO datasets insist on COCO's 80)."""
    from pycocotools.coco import COCO

    class_names, category_ids = train.class_names, train.category_ids

    def coco_from(channel):
        coco = COCO()
        coco.dataset = channel.data
        with contextlib.redirect_stdout(io.StringIO()):
            coco.createIndex()
        return coco

    class Dataset(model.dataset_base(gdata)):
        def __init__(self, channel, **kwargs):
            self._channel = channel
            self._prebuilt_coco = coco_from(channel)
            self.image_sizes = []  # (width, height) of each image kept, in the dataset's order
            super().__init__(root=channel.directory, splits=[f"instances_{channel.split}"], **kwargs)

        @property
        def classes(self):
            return class_names

        def _load_jsons(self):
            coco = self._prebuilt_coco
            self._coco.append(coco)
            self.json_id_to_contiguous = {v: k for k, v in enumerate(category_ids)}
            self.contiguous_id_to_json = {v: k for k, v in self.json_id_to_contiguous.items()}
            items, columns, ratios = [], [], []
            for entry in coco.loadImgs(sorted(coco.getImgIds())):
                row = model.read_image(self, coco, entry)
                if row is None:
                    continue
                items.append(os.path.join(self._channel.image_dir, entry["file_name"]))
                columns.append(row)
                ratios.append(float(entry["width"]) / entry["height"])
                self.image_sizes.append((entry["width"], entry["height"]))
            per_column = [[row[k] for row in columns] for k in range(len(model.image_columns))]
            return (items, *per_column, ratios)

    train_ds = Dataset(train, skip_empty=True, **model.train_dataset_options())
    val_ds = Dataset(val, skip_empty=False) if val is not None else None
    return train_ds, val_ds
