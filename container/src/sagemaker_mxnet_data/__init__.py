"""Data tools of the image, apart from the launcher: MNIST's IDX files (mnist_files), MXNet's RecordIO written
without MXNet (recordio), COCO's category names (coco_categories), synthetic COCO for R-CNN smoke tests
(synthetic_coco), and the `synth-data` command (synth_data). The built-in programs and the tests use them."""
