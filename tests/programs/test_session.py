"""session: the MXNet side of the skeleton in one process (Horovod's stand-in), and where a resumed run
starts. The multi-rank side runs in the programs' 2-rank tests (test_mnist_mpi, rcnn/test_training)."""

import sys

import pytest
from mxnet_programs import session as sess
from mxnet_programs.process import ProgramError, Stopped, StopRequest
from mxnet_programs.sagemaker_env import DistEnv


def test_start_position_after_a_complete_or_a_stopped_epoch():
    assert sess.start_position(None) == (0, 0)
    assert sess.start_position({"epoch": 3, "batch": None}) == (3, 0)  # epochs 0..2 done: run epoch 3
    assert sess.start_position({"epoch": 3, "batch": 17}) == (2, 17)  # stopped in epoch 2 after 17 steps


def test_without_horovod_one_process_gets_the_stand_in_and_a_warning(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "horovod", None)
    monkeypatch.setitem(sys.modules, "horovod.mxnet", None)
    hvd = sess.import_horovod("prog", DistEnv())
    assert isinstance(hvd, sess.SingleProcessHorovod)
    assert "prog: warning: horovod.mxnet is not importable" in capsys.readouterr().err
    with pytest.raises(ProgramError, match="2 ranks were launched but horovod.mxnet cannot be imported"):
        sess.import_horovod("prog", DistEnv(0, 2, 0, 2))


@pytest.mark.parametrize("kvstore", ["local", "device"])
def test_a_local_kvstore_never_imports_horovod(monkeypatch, capsys, kvstore):
    monkeypatch.setitem(sys.modules, "horovod", None)
    assert isinstance(sess.collectives("prog", DistEnv(), kvstore, None), sess.SingleProcessHorovod)
    assert capsys.readouterr().err == ""


@pytest.fixture
def session(tmp_path):
    pytest.importorskip("mxnet", reason="needs mxnet: run inside the image (make image-tests)")
    s = sess.Session("prog", DistEnv(), StopRequest(), kvstore="local")
    yield s
    s.close()


def test_collectives_in_one_process_are_the_local_values(session):
    assert session.allreduce_sum([1.0, 2.5], "x").tolist() == [1.0, 2.5]
    assert session.mean_over_ranks([4.0], "x") == [4.0]
    assert session.broadcast_object({"a": 1}, "x") == {"a": 1}
    assert session.allgather_object(7, "x") == [7]
    assert not session.uses_horovod and (session.rank, session.size, session.distributed) == (0, 1, False)
    assert not session.uses_parameter_servers and not session.one_device_per_rank


def test_stop_vote_in_one_process_reads_the_flag(session):
    vote = session.stop_vote("v")
    assert not vote.after_step() and not vote.final() and not session.agree_stop("a")
    session.stop.set()
    assert vote.after_step() and vote.final() and session.agree_stop("a")


def test_finish_stopped_ends_with_stopped(session, capsys):
    with pytest.raises(Stopped):
        session.finish_stopped()
    assert capsys.readouterr().out.strip() == "prog: stopped by SIGTERM"


def _net_and_trainer(session, seed):
    mx = session.mx
    mx.random.seed(seed)
    net = mx.gluon.nn.Dense(3, in_units=4, prefix="d_")
    net.initialize(mx.init.Xavier())
    trainer = session.trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9})
    return net, trainer


def test_checkpoint_then_resume_restores_parameters_optimizer_and_state(session, tmp_path):
    mx = session.mx
    session.open_checkpoints(str(tmp_path), "prog", keep=2)
    net, trainer = _net_and_trainer(session, 1)
    with mx.autograd.record():
        loss = net(mx.nd.ones((2, 4))).sum()
    loss.backward()
    trainer.step(2)  # momentum state worth restoring
    session.save_checkpoint(net, trainer, 2, {"best": 0.5}, batch=7)
    other, other_trainer = _net_and_trainer(session, 2)
    assert not (other.weight.data() == net.weight.data()).asnumpy().all()
    state, stem = session.resume(other, other_trainer, mx.cpu())
    assert stem.endswith("prog-epoch-0002-batch-000007")
    assert (state["epoch"], state["batch"], state["best"], state["world_size"]) == (2, 7, 0.5, 1)
    assert (other.weight.data() == net.weight.data()).asnumpy().all()
    # The optimizer's momentum, value by value (not zero: one step was taken)...
    saved, restored = trainer._updaters[0].states, other_trainer._updaters[0].states
    assert restored.keys() == saved.keys()
    for index, momentum in saved.items():
        assert momentum.abs().sum().asscalar() > 0
        assert (restored[index] == momentum).asnumpy().all(), index
    # ...so the next step is the one the saved run would have taken.
    for model, model_trainer in ((net, trainer), (other, other_trainer)):
        with mx.autograd.record():
            loss = model(mx.nd.ones((2, 4))).sum()
        loss.backward()
        model_trainer.step(2)
    assert (other.weight.data() == net.weight.data()).asnumpy().all()
    assert sess.start_position(state) == (1, 7)


def test_resume_without_a_checkpoint(session, tmp_path):
    session.open_checkpoints(str(tmp_path), "prog", keep=2)
    net, trainer = _net_and_trainer(session, 1)
    assert session.resume(net, trainer, session.mx.cpu()) == (None, None)
