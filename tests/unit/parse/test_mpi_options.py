"""mpi_options.py: the user's MPI options parsed once: split as a shell would, --NCCL_DEBUG taken out (its cases as
the settings parse them: test_settings.py), the -mca names the user sets, and the variables their -x options give
the ranks, a bare `-x NAME` taking the environment's value."""

import pytest
from sagemaker_mxnet_horovod.core.exits import ConfigError
from sagemaker_mxnet_horovod.parse.mpi_options import MpiOptions, parse_mpi_options

KEY = "sagemaker_mpi_custom_mpi_options"


def test_nothing_given_is_no_options():
    assert parse_mpi_options(KEY, "") == parse_mpi_options(KEY, None) == MpiOptions()


def test_the_mca_names_the_user_sets_and_not_their_values():
    options = parse_mpi_options(KEY, "-mca btl tcp,self --mca pml btl_tcp_if_include -x btl_x=1")
    assert options.mca_names == {"btl", "pml"}
    assert options.sets_mca("pml") and not options.sets_mca("btl_tcp_if_include")


def test_exported_variables_take_their_own_value_or_the_environments():
    options = parse_mpi_options(KEY, "-x 'MSG=a b' -x LD_PRELOAD -x UNSET --NCCL_DEBUG=INFO -x T=/opt/ml/output/t")
    assert options.exported == (("MSG", "a b"), ("LD_PRELOAD", None), ("UNSET", None), ("T", "/opt/ml/output/t"))
    assert options.exported_values({"LD_PRELOAD": "/lib/x.so"}) == {
        "MSG": "a b", "LD_PRELOAD": "/lib/x.so", "T": "/opt/ml/output/t"}
    assert options.for_mpirun == ("-x", "MSG=a b", "-x", "LD_PRELOAD", "-x", "UNSET", "-x", "T=/opt/ml/output/t")


def test_unbalanced_quoting_names_the_key():
    with pytest.raises(ConfigError, match=f"^hyperparameter {KEY}=\"-x 'MSG\": No closing quotation$"):
        parse_mpi_options(KEY, "-x 'MSG")
