# shellcheck shell=bash
# The image's BASH_ENV: every non-interactive bash reads this first, so it must stay a no-op for
# everything but one command line. SDK v3's ModelTrainer(source_code=..., distributed=MPI(...)) replaces
# the container's command with
#   /bin/bash -c "chmod +x /opt/ml/input/data/sm_drivers/sm_train.sh && /opt/ml/input/data/sm_drivers/sm_train.sh"
# whose MPI driver needs one ssh key shared by every container of the image and names an interface that
# local mode lacks. That invocation goes to `train` instead (docs/sdk-v3.md); any other v3 driver (a
# single script, SourceCode.command) runs as the SDK wrote it.
case "${BASH_EXECUTION_STRING-}" in
  */opt/ml/input/data/sm_drivers/sm_train.sh*)
    if grep -qs 'distributed_drivers/mpi_driver.py' /opt/ml/input/data/sm_drivers/sm_train.sh; then
      unset BASH_ENV
      echo "sdk-v3: SDK v3 MPI driver invocation: running the image's launcher (train) instead" >&2
      # The command replaced the image's entrypoint (tini) too: as PID 1, start it again to reap and
      # forward signals.
      if [ "$$" = 1 ]; then
        exec /usr/bin/tini -- train --sdk-v3-driver /opt/ml/input/data/sm_drivers
      fi
      exec train --sdk-v3-driver /opt/ml/input/data/sm_drivers
    fi
    ;;
esac
