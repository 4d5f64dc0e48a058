"""The GluonCV side by side's own arithmetic and parsing (benchmarks/gluoncv_side_by_side.py), on small records in
the runner's JSON-lines format whose answers are worked out by hand below. Runs no container: the study itself runs
on a quiet machine."""

from benchmarks import gluoncv_side_by_side as sbs

# A run as the runner records it. By hand:
#   training images/s over iterations 2..3: 2 batches between t=10 and t=16: 2 / 6 = 1/3
#   validation images/s: 8 images scored, inference from the last iteration (t=16) to scoring's start (t=20): 2.0
#   stats: bbox's first summary (a second one, from a per-class pass, is not the mAP), and segm's
RECORD = "\n".join([
    '{"event": "start", "t": 1.0, "argv": []}',
    '{"event": "train_images", "count": 5, "t": 2.0}',
    '{"event": "iteration", "losses": [0.5, 0.25, 4.0, 0.75], "t": 10.0}',
    '{"event": "iteration", "losses": [0.5, 0.25, 3.0, 0.5], "t": 12.0}',
    "",
    '{"event": "iteration", "losses": [0.4, 0.2, 2.0, 0.5], "t": 16.0}',
    '{"event": "scoring", "iou_type": "bbox", "images": 8, "t": 20.0}',
    '{"event": "stats", "iou_type": "bbox", "stats": [0.1234, 0.5, 0.1, 0, 0, 0, 0, 0, 0, 0, 0, 0], "t": 21.0}',
    '{"event": "stats", "iou_type": "bbox", "stats": [0.9, 0.9, 0.9, 0, 0, 0, 0, 0, 0, 0, 0, 0], "t": 21.5}',
    '{"event": "stats", "iou_type": "segm", "stats": [0.25, 0.5, 0.1, 0, 0, 0, 0, 0, 0, 0, 0, 0], "t": 22.0}',
])


def test_a_record_gives_its_losses_rates_stats_and_train_images():
    records = sbs.read_record(RECORD)
    assert sbs.iteration_losses(records) == [[0.5, 0.25, 4.0, 0.75], [0.5, 0.25, 3.0, 0.5], [0.4, 0.2, 2.0, 0.5]]
    assert abs(sbs.train_rate(records) - 1 / 3) < 1e-12
    assert sbs.val_rate(records) == 2.0
    assert sbs.stats(records) == {"bbox": [0.1234, 0.5, 0.1] + [0] * 9, "segm": [0.25, 0.5, 0.1] + [0] * 9}
    assert sbs.train_images(records) == 5


def test_rates_need_two_iterations_and_a_scoring():
    one = sbs.read_record('{"event": "iteration", "losses": [1.0], "t": 3.0}')
    assert sbs.train_rate(one) is None
    assert sbs.val_rate(one) is None
    assert sbs.ratio(None, 2.0) is None
    assert sbs.ratio(3.0, 2.0) == 1.5


def test_loss_rows_pair_iterations_and_find_the_first_difference():
    names = ["rpn_cls", "rcnn_cls"]
    ours = [[0.5, 4.0], [0.5, 3.0], [0.4, 2.0]]
    # iteration 1 equal; iteration 2: 3.00001 is within 1e-5 of 3.0 relative (1e-5 / 3); iteration 3: 2.1 is not
    theirs = [[0.5, 4.0], [0.5, 3.00001], [0.4, 2.1]]
    rows = sbs.loss_rows(names, ours, theirs)
    assert [(i, name, equal) for i, name, _, _, _, equal in rows] == [
        (1, "rpn_cls", True), (1, "rcnn_cls", True), (2, "rpn_cls", True), (2, "rcnn_cls", True),
        (3, "rpn_cls", True), (3, "rcnn_cls", False)]
    assert abs(rows[-1][4] - (2.0 - 2.1)) < 1e-12
    assert sbs.first_difference(rows) == 3
    assert sbs.first_difference(sbs.loss_rows(names, ours, ours)) is None


def test_stats_rows_compare_to_three_decimals_and_exactly():
    ours = {"bbox": [0.12345, 0.1241], "segm": [0.5]}
    theirs = {"bbox": [0.12349, 0.1244], "segm": [0.5]}
    rows = sbs.stats_rows(ours, theirs)
    # 0.12345 and 0.12349 print 0.123 and 0.123; 0.1241 and 0.1244 print 0.124 and
    # 0.124: equal to three decimals, not exactly; segm equal; 0.1234 and 0.1236 print 0.123 and 0.124
    assert [(t, name, three, exact) for t, name, _, _, three, exact in rows] == [
        ("bbox", "AP", True, False), ("bbox", "AP50", True, False), ("segm", "AP", True, True)]
    assert sbs.stats_rows({"bbox": [0.1234]}, {"bbox": [0.1236]})[0][4] is False
