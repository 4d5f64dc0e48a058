"""One training iteration of an R-CNN model: the batch split over the rank's devices, forward, GluonCV's
R-CNN losses (plus the model's own, e.g. the mask loss), backward, one optimizer step."""

import math


class TrainStep:
    def __init__(self, mx, model, net, trainer, ctx, amp=None):
        self.mx, self.model, self.net, self.trainer, self.ctx, self.amp = mx, model, net, trainer, ctx, amp
        loss = mx.gluon.loss
        self.rpn_cls_loss = loss.SigmoidBinaryCrossEntropyLoss(from_sigmoid=False)
        self.rpn_box_loss = loss.HuberLoss(rho=1.0 / 9.0)  # smooth L1
        self.rcnn_cls_loss = loss.SoftmaxCrossEntropyLoss()
        self.rcnn_box_loss = loss.HuberLoss(rho=1.0)
        self.mask_loss = loss.SigmoidBinaryCrossEntropyLoss(from_sigmoid=False)

    def loss_blocks(self):
        """Every loss block, for SageMaker Debugger's losses collection (the mask loss is used by Mask R-CNN only)."""
        return [self.rpn_cls_loss, self.rpn_box_loss, self.rcnn_cls_loss, self.rcnn_box_loss, self.mask_loss]

    def __call__(self, batch, images, where):
        """Trains on one batch of `images` images; returns the losses (model.loss_names order) averaged over
        the devices. A non-finite loss is an error naming `where`."""
        parts = [self.forward_backward(shard) for shard in self.split_batch(batch)]
        self.trainer.step(images)
        values = [sum(float(p[k].asscalar()) for p in parts) / len(parts) for k in range(len(parts[0]))]
        if not all(math.isfinite(v) for v in values):
            raise RuntimeError(f"non-finite loss at {where}: {dict(zip(self.model.loss_names, values))}")
        return values

    def split_batch(self, batch):
        """Batchify output -> one list of arrays per device, each on its device."""
        return [[(element[j] if isinstance(element, (list, tuple)) else element).as_in_context(ctx)
                 for element in batch] for j, ctx in enumerate(self.ctx)]

    def forward_backward(self, sample):
        """Losses of one device's share of a batch (GluonCV's R-CNN losses), backward included."""
        autograd = self.mx.autograd
        data, label, (rpn_cls_targets, rpn_box_targets, rpn_box_masks), sample_part = self.model.split_sample(sample)
        with autograd.record():
            out = self.net(data, label[:, :, :4], label[:, :, 4:5])
            heads, outputs_part = self.model.split_outputs(out)
            cls_pred, box_pred, rpn_score, rpn_box, cls_targets, box_targets, box_masks = heads
            rpn_score = rpn_score.squeeze(axis=-1)
            num_rpn_pos = (rpn_cls_targets >= 0).sum()
            rpn_loss1 = self.rpn_cls_loss(rpn_score, rpn_cls_targets,
                                          rpn_cls_targets >= 0) * rpn_cls_targets.size / num_rpn_pos
            rpn_loss2 = self.rpn_box_loss(rpn_box, rpn_box_targets, rpn_box_masks) * rpn_box.size / num_rpn_pos
            num_rcnn_pos = (cls_targets >= 0).sum()
            rcnn_loss1 = self.rcnn_cls_loss(cls_pred, cls_targets, cls_targets.expand_dims(-1) >= 0) * \
                cls_targets.size / num_rcnn_pos
            rcnn_loss2 = self.rcnn_box_loss(box_pred, box_targets, box_masks) * box_pred.size / num_rcnn_pos
            extra = self.model.extra_losses(self, self.net, outputs_part, sample_part, cls_targets)
            total = rpn_loss1.sum() + rpn_loss2.sum() + rcnn_loss1.sum() + rcnn_loss2.sum()
            for loss in extra:
                total = total + loss
            if self.amp is not None:
                with self.amp.scale_loss(total, self.trainer) as scaled:
                    autograd.backward(scaled)
            else:
                total.backward()
        return [rpn_loss1.mean(), rpn_loss2.mean(), rcnn_loss1.sum(), rcnn_loss2.sum(), *extra]
