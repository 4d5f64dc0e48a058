"""MNIST with Gluon + Horovod: the smoke-test workload of the image (``sagemaker_program=mnist``).

Run once per rank by the launcher under mpirun (``python /opt/entrypoints/mnist.py --key value ...``)
or directly as a single process. ``--help`` lists the hyperparameters; ``--batch_size`` and
``--batch-size`` are the same key; booleans are true/false/1/0.

Data (channels ``train`` and ``test``)
    File mode: a channel dir holds any of
      * MNIST IDX files, plain or gzip (train-images-idx3-ubyte, t10k-labels-idx1-ubyte.gz, ...):
        recognised by their magic numbers, not their names; image and label files pair up by name.
        A channel holding both the train-* and t10k-* pairs uses the pair matching the channel.
      * ``.npz`` with arrays ``data`` (N, 28, 28) / (N, 784) / (N, 1, 28, 28) and ``labels`` (N,)
        (also accepted: x/y, x_train/y_train or x_test/y_test, images/labels, image/label);
      * RecordIO files (format below).
    All recognised files of a channel are read (in name order) and concatenated. Rank r of N then
    uses samples r, r+N, r+2N, ... of that data set. A channel whose S3DistributionType is
    ShardedByS3Key (SM_INPUT_DATA_CONFIG) holds a different part on each host: it is split by local
    rank instead (local rank l of L ranks per host uses samples l, l+L, ... of its host's part), so
    the job trains on every host's part once per epoch; rank 0 logs one line per channel saying which
    split was used. A sharded ``test`` channel works the same way: each host scores its own part and
    the counts are summed, so val_accuracy covers the union of the hosts' parts. Alternatively per-rank File channels
    train_0..train_{N-1} (no ``train`` channel): rank r uses all of train_r.
    Every rank runs the same number of steps per epoch (the smallest shard decides); shards are
    reshuffled every epoch, so samples past that count are still used in other epochs.

    Pipe mode (SM_INPUT_DATA_CONFIG marks ``train_0`` or ``train`` as TrainingInputMode "Pipe"):
      One FIFO has exactly one reader, so rank r reads its own channel ``train_<r>`` (a single
      process may use ``train``) from ``$SM_INPUT_DIR/data/train_<r>_<k>``, k = 0, 1, ... for the
      k-th epoch this process runs (a resumed job starts again at k = 0). Channels train_0 ..
      train_{N-1} must all be configured, else the job fails before training (no per-rank channel
      at all reads "have none"). Each epoch's FIFO is read to its end into memory, then trained on
      (MNIST-sized data). Test data: the ``test`` channel in File mode when there is one, else
      per-rank Pipe channels ``test_<r>`` read the same way (a fresh pass per validation).
      Record format: dmlc RecordIO framing (uint32 magic 0xced7230a, uint32 lrecord = cflag << 29 |
      length, payload padded to 4 bytes; cflag 1/2/3 split records at an aligned magic word, as
      mx.recordio writes them). Each payload is ``mx.recordio.pack(IRHeader(0, label, id, 0),
      pixels)``: a 24-byte header (struct "IfQQ": flag, float label, id, id2) then 784 raw uint8
      pixels (28x28, row-major). `synth-data shard --format recordio` writes exactly this.

Outputs
    * Rank 0 logs one line per epoch (regexes: METRIC_DEFINITIONS)::
          epoch=3 train_loss=0.1234 train_accuracy=0.9712 val_accuracy=0.9801 samples_per_sec=1234.5 ...
      samples_per_sec counts all ranks' training samples over the epoch's training time, train_samples
      the samples all ranks trained on in the epoch.
      val_accuracy covers the whole test set: every rank scores its shard, correct/total are summed.
    * Rank 0 exports the model to the model dir: model-symbol.json + model-0000.params
      (``mx.gluon.nn.SymbolBlock.imports(symbol, ["data"], params)``) and metrics.json.
    * Rank 0 checkpoints after every epoch to the checkpoint dir: checkpoint-epoch-NNNN.params
      (+ .states optimizer state, + .json, written last), keeping the newest 2. On start the newest
      checkpoint there is resumed (rank 0 reads it, all ranks receive it by broadcast).
    * Rank 0 writes TensorBoard scalars with tensorboardX if it is installed.

SIGTERM: the ranks agree on a step to stop at (within a batch of the signal), rank 0 writes a
checkpoint (``checkpoint-epoch-NNNN-batch-BBBBBB``, resumable mid-epoch), and all exit 143. One rank
receiving the signal is enough. While waiting for a Pipe FIFO between epochs it exits 143 at once (the
epoch's checkpoint is already written). Note for launchers: mpirun itself, on SIGTERM, signals the
ranks only after ``odls_base_sigkill_timeout`` (1 s) and SIGKILLs them 1 s later; forward SIGTERM to
the rank processes directly to give them time to checkpoint.

Exit codes: 0 done; 2 bad hyperparameter or input, one line ``mnist: error: ...`` on stderr, normally
before any MPI collective; 1 unexpected failure (traceback, then ``mnist: error: ...``); 143 stopped
by SIGTERM.
"""

from mxnet_programs import mnist

METRIC_DEFINITIONS = mnist.METRIC_DEFINITIONS

if __name__ == "__main__":
    mnist.main()
