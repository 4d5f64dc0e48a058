"""COCO mAP over the whole validation set: each rank predicts a contiguous shard, the results are gathered
to rank 0 with Horovod (allgather of pickled objects) and scored there with pycocotools through GluonCV's
metrics; every rank gets the numbers back (they decide the best model)."""

import os
import time

from mxnet_programs.metrics import format_metrics
from mxnet_programs.process import log
from mxnet_programs.rcnn.data import ListBatchSampler, val_shard


def _log_summary(names, values):
    for name, value in zip(names, values):
        if "Summary" in name:
            log(f"  {name.strip().strip('~ ')}")
            for line in str(value).splitlines():
                log(f"  {line.strip()}")


def validate(session, model, net, val_ds, val_tf, val_batchify, ctx, config, epoch):
    """{val_bbox_map: ..., [val_segm_map: ...], val_images, val_sec} on every rank; rank 0 logs the line."""
    mx = session.mx
    start_time = time.time()
    if config.hybridize:
        net.hybridize(static_alloc=config.static_alloc)  # drop the training graph: inference takes another path
    start, end = val_shard(len(val_ds), session.rank, session.size)
    loader = mx.gluon.data.DataLoader(
        val_ds.transform(val_tf), batch_size=len(ctx), shuffle=False,
        sampler=ListBatchSampler(list(range(start, end))), batchify_fn=val_batchify, last_batch="keep",
        num_workers=config.num_workers) if end > start else []
    collector = model.val_collector(val_ds, config.output_data_dir, start)
    for batch in loader:
        for j, sample in enumerate(zip(*batch)):
            collector.add(net, sample[0].as_in_context(ctx[j % len(ctx)]), sample)
    gathered = session.allgather_object(collector.results(), f"rcnn.val.{epoch}")
    result = {}
    if session.rank == 0:
        os.makedirs(config.output_data_dir, exist_ok=True)
        prefix = os.path.join(config.output_data_dir, f"{model.prog}_val_results")
        result = model.score(val_ds, gathered, prefix, _log_summary)
        result.update(val_images=len(val_ds), val_sec=time.time() - start_time)
        pairs = [("epoch", epoch)] + [(name, result[name]) for name in model.map_names]
        pairs += [("val_images", result["val_images"]), ("val_sec", float(result["val_sec"]))]
        log(format_metrics(pairs))
        session.tb.scalars(epoch, {f"validation/{k[4:]}": v for k, v in result.items() if k.endswith("_map")})
    return session.broadcast_object(result, f"rcnn.valres.{epoch}")
