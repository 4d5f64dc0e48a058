"""One training iteration of an R-CNN model: the batch split over the rank's devices, forward, GluonCV's
R-CNN losses (plus the model's own, e.g. the mask loss), backward, one optimizer step."""

import math

RPN_BOX_RHO = 1.0 / 9.0  # smooth-L1's switch from square to linear for the RPN's box offsets (GluonCV's)
RCNN_BOX_RHO = 1.0  # and for the RCNN head's


class RcnnLosses:
    """GluonCV's four R-CNN loss terms of one device's images, from the network's outputs and their targets, as
    GluonCV's train_faster_rcnn.py computes them. Each term is one value per image; the device's training loss is
    their sum over its images (the optimizer then divides by the images of the step). RPN terms are normalised by
    the anchors the RPN target sampler drew on the device (targets >= 0: positive and negative), RCNN terms by the
    RoIs the RCNN sampler drew (class targets >= 0: foreground and background); the box terms are smooth-L1 (Huber
    with rho RPN_BOX_RHO and RCNN_BOX_RHO) over the masked coordinates."""

    def __init__(self, mx):
        loss = mx.gluon.loss
        self.rpn_cls = loss.SigmoidBinaryCrossEntropyLoss(from_sigmoid=False)
        self.rpn_box = loss.HuberLoss(rho=RPN_BOX_RHO)
        self.rcnn_cls = loss.SoftmaxCrossEntropyLoss()
        self.rcnn_box = loss.HuberLoss(rho=RCNN_BOX_RHO)

    def blocks(self):
        return [self.rpn_cls, self.rpn_box, self.rcnn_cls, self.rcnn_box]

    def __call__(self, rpn_score, rpn_box, rpn_targets, cls_pred, box_pred, rcnn_targets):
        """rpn_score (B, A) logits, rpn_box (B, A, 4), rpn_targets: (cls (B, A): 1, 0, -1 ignored; box (B, A, 4);
        box masks (B, A, 4)); cls_pred (B, N, classes + 1), box_pred (B, P, classes, 4), rcnn_targets: (cls (B, N):
        class + 1, 0 background, -1 ignored; box (B, P, classes, 4); box masks (B, P, classes, 4)).
        Returns (rpn_cls, rpn_box, rcnn_cls, rcnn_box), each of shape (B,)."""
        rpn_cls_targets, rpn_box_targets, rpn_box_masks = rpn_targets
        cls_targets, box_targets, box_masks = rcnn_targets
        # Each loss block averages an image's elements: x elements / drawn samples = sum / drawn samples
        # (x B: the optimizer's rescale by the images divides it again).
        num_rpn = (rpn_cls_targets >= 0).sum()
        rpn_cls = self.rpn_cls(rpn_score, rpn_cls_targets, rpn_cls_targets >= 0) * rpn_cls_targets.size / num_rpn
        rpn_box = self.rpn_box(rpn_box, rpn_box_targets, rpn_box_masks) * rpn_box.size / num_rpn
        num_rcnn = (cls_targets >= 0).sum()
        rcnn_cls = self.rcnn_cls(cls_pred, cls_targets, cls_targets.expand_dims(-1) >= 0) * cls_targets.size / num_rcnn
        rcnn_box = self.rcnn_box(box_pred, box_targets, box_masks) * box_pred.size / num_rcnn
        return rpn_cls, rpn_box, rcnn_cls, rcnn_box


class TrainStep:
    def __init__(self, mx, model, net, trainer, ctx, amp=None):
        self.mx, self.model, self.net, self.trainer, self.ctx, self.amp = mx, model, net, trainer, ctx, amp
        self.losses = RcnnLosses(mx)
        self.mask_loss = mx.gluon.loss.SigmoidBinaryCrossEntropyLoss(from_sigmoid=False)

    def loss_blocks(self):
        """Every loss block, for SageMaker Debugger's losses collection (the mask loss is used by Mask R-CNN only)."""
        return [*self.losses.blocks(), self.mask_loss]

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
        """Losses of one device's share of a batch (GluonCV's R-CNN losses), backward included. Logged like
        GluonCV's scripts: the RPN terms' mean over the device's images, the others' sum."""
        autograd = self.mx.autograd
        data, label, rpn_targets, sample_part = self.model.split_sample(sample)
        with autograd.record():
            out = self.net(data, label[:, :, :4], label[:, :, 4:5])
            heads, outputs_part = self.model.split_outputs(out)
            cls_pred, box_pred, rpn_score, rpn_box, cls_targets, box_targets, box_masks = heads
            rpn_cls, rpn_box, rcnn_cls, rcnn_box = self.losses(rpn_score.squeeze(axis=-1), rpn_box, rpn_targets,
                                                               cls_pred, box_pred, (cls_targets, box_targets, box_masks))
            extra = self.model.extra_losses(self, self.net, outputs_part, sample_part, cls_targets)
            total = rpn_cls.sum() + rpn_box.sum() + rcnn_cls.sum() + rcnn_box.sum()
            for loss in extra:
                total = total + loss
            if self.amp is not None:
                with self.amp.scale_loss(total, self.trainer) as scaled:
                    autograd.backward(scaled)
            else:
                total.backward()
        return [rpn_cls.mean(), rpn_box.mean(), rcnn_cls.sum(), rcnn_box.sum(), *extra]
