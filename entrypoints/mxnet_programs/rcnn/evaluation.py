"""COCO mAP over the whole validation set, and each class's AP: each rank predicts a contiguous shard, the results
are gathered to rank 0 with Horovod (allgather of pickled objects) and scored there with pycocotools through GluonCV's
metrics; every rank gets the numbers back (they decide the best model)."""

import os
import time

from mxnet_programs.metrics import format_metrics, quoted
from mxnet_programs.process import log
from mxnet_programs.rcnn import coco_map
from mxnet_programs.rcnn.data import ListBatchSampler, val_shard


def _log_summary(names, values):
    for name, value in zip(names, values):
        if "Summary" in name:
            log(f"  {name.strip().strip('~ ')}")
            for line in str(value).splitlines():
                log(f"  {line.strip()}")


def class_average_precision(val_ds, per_category):
    """Each class's AP, in the classes' order: [{"class", "category_id", "<iou type>_ap" (None without objects),
    "val_objects"}]; per_category: {IoU type: {category id: AP}}."""
    found = []
    for index, name in enumerate(val_ds.classes):
        cid = val_ds.contiguous_id_to_json[index]
        entry = {"class": name, "category_id": cid}
        entry.update({f"{iou_type}_ap": aps[cid] for iou_type, aps in per_category.items()})
        entry["val_objects"] = coco_map.object_count(val_ds.coco, cid)
        found.append(entry)
    return found


def validate(session, model, net, val_ds, val_tf, val_batchify, ctx, config, epoch):
    """{val_bbox_map: ..., [val_segm_map: ...], val_images, val_sec, class_ap: [...]} on every rank; rank 0 logs the
    lines: the mAPs, then one per class:
        epoch=0 val_bbox_map=0.0123 [val_segm_map=0.0101] val_images=5000 val_sec=321.00
        epoch=0 class="bolt" val_bbox_ap=0.0456 [val_segm_ap=0.0321] val_objects=1234   (none: no objects)"""
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
        maps, per_category = model.score(val_ds, gathered, prefix, _log_summary)
        result = dict(maps, val_images=len(val_ds), val_sec=time.time() - start_time,
                      class_ap=class_average_precision(val_ds, per_category))
        pairs = [("epoch", epoch)] + [(name, result[name]) for name in model.map_names]
        pairs += [("val_images", result["val_images"]), ("val_sec", float(result["val_sec"]))]
        log(format_metrics(pairs))
        scalars = {f"validation/{k[4:]}": v for k, v in result.items() if k.endswith("_map")}
        for entry in result["class_ap"]:
            aps = [(f"val_{iou_type}_ap", entry[f"{iou_type}_ap"]) for iou_type in per_category]
            log(format_metrics([("epoch", epoch), ("class", quoted(entry["class"])),
                                *[(key, "none" if ap is None else ap) for key, ap in aps],
                                ("val_objects", entry["val_objects"])]))
            scalars.update({f"validation/{key[4:]}/{entry['class']}": ap for key, ap in aps if ap is not None})
        session.tb.scalars(epoch, scalars)
    return session.broadcast_object(result, f"rcnn.valres.{epoch}")
