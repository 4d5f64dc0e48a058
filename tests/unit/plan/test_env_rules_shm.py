"""env_rules.shm_size_check and shm_budget: the start log warns, with the fixes, when this host's /dev/shm is smaller
than what the job needs there (its ranks per host, their data-loader workers, its GPUs); the plan keeps the
budget for the diagnosis."""

import dataclasses

from sagemaker_mxnet_horovod.plan.env_rules import shm_budget, shm_size_check
from unit_helpers.plan_cases import config, plan
from unit_helpers.rule_cases import CPU2, GPU8, job

MIB = 1 << 20
DOCKER_DEFAULT = dataclasses.replace(CPU2, shm_bytes=64 * MIB)


def test_rcnns_four_loader_workers_do_not_fit_dockers_default():
    (warning,) = shm_size_check(job(facts=DOCKER_DEFAULT, sagemaker_program="faster_rcnn"))
    assert warning.startswith("WARNING: /dev/shm is 64 MiB, less than the about 256 MiB (1 rank x 4 data-loader "
                              "workers (num-workers) x 64 MiB) this job needs")
    assert "--shm-size=1g" in warning and "fewer data-loader workers (num-workers)" in warning
    assert shm_size_check(job(facts=DOCKER_DEFAULT, sagemaker_program="faster_rcnn", **{"num-workers": "0"})) == []


def test_rcnns_loader_workers_on_a_gpu_host_are_its_cores_per_rank_but_one():
    # GPU8: 8 GPUs, 8 ranks per host (one per GPU), the program's default asked with the host's cores
    budget = shm_budget(job(hosts=("algo-1", "algo-2"), facts=GPU8, sagemaker_program="mask_rcnn"))
    workers = GPU8.cpu_count // 8 - 1
    assert workers >= 1 and f"8 ranks x {workers} data-loader workers (num-workers)" in ", ".join(budget.parts)


def test_a_partly_filled_dev_shm_is_measured_by_what_is_free():
    shared = dataclasses.replace(CPU2, shm_bytes=2 << 30, shm_free_bytes=100 * MIB)  # docker run --ipc=host
    (warning,) = shm_size_check(job(facts=shared, sagemaker_program="faster_rcnn"))
    assert warning.startswith("WARNING: /dev/shm is 100 MiB free of 2 GiB, less than the about 256 MiB")
    assert shm_budget(job(facts=shared, sagemaker_program="faster_rcnn")).free_bytes == 100 * MIB
    empty = dataclasses.replace(shared, shm_free_bytes=2 << 30)
    assert shm_size_check(job(facts=empty, sagemaker_program="faster_rcnn")) == []


def test_mnist_and_a_few_cpu_ranks_fit_and_say_nothing():
    assert shm_size_check(job(facts=DOCKER_DEFAULT)) == []
    assert shm_size_check(job(facts=DOCKER_DEFAULT, sagemaker_mpi_num_of_processes_per_host="2")) == []


def test_a_users_num_workers_and_gpus_count():
    budget = shm_budget(job(hosts=("algo-1", "algo-2"), facts=dataclasses.replace(GPU8, shm_bytes=64 * MIB),
                            num_workers="2"))
    assert (budget.need_bytes, budget.gpus, budget.loader_key) == (8 * 4 * MIB + 8 * 2 * 64 * MIB + 8 * 128 * MIB,
                                                                   8, "num_workers")
    assert "NCCL_SHM_DISABLE=1" in shm_size_check(job(hosts=("algo-1", "algo-2"),
                                                      facts=dataclasses.replace(GPU8, shm_bytes=64 * MIB)))[0]


def test_the_plan_keeps_the_budget_and_its_notes_the_warning():
    planned = plan(config(hps={"sagemaker_program": "train.py", "sagemaker_submit_directory": "/opt/ml/code",
                               "num_workers": "4"}), facts=DOCKER_DEFAULT)
    assert (planned.shm.size_bytes, planned.shm.need_bytes) == (64 * MIB, 256 * MIB)
    assert any(note.startswith("WARNING: /dev/shm is 64 MiB") for note in planned.notes)


def test_a_parameter_server_job_warns_for_its_workers_loader_workers_without_open_mpi():
    # Two kvstore workers per host, each with two DataLoader workers; ps-lite uses sockets, not /dev/shm.
    ps = {"sagemaker_program": "train.py", "sagemaker_submit_directory": "/opt/ml/code",
          "sagemaker_parameter_server_enabled": "true", "sagemaker_mpi_num_of_processes_per_host": "2"}
    (warning,) = shm_size_check(job(hosts=("algo-1", "algo-2"), facts=DOCKER_DEFAULT, num_workers="2", **ps))
    assert warning.startswith("WARNING: /dev/shm is 64 MiB, less than the about 256 MiB (2 ranks x 2 data-loader "
                              "workers (num_workers) x 64 MiB) this job needs")
    assert shm_size_check(job(hosts=("algo-1", "algo-2"), facts=DOCKER_DEFAULT, **ps)) == []
