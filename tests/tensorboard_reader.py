"""Reads a TensorBoard log directory with TensorBoard's own loader and prints what it found, one line per
scalar: TAG STEP VALUE. Used by core_tensorboard_test to check the event files rlcpp writes."""
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

acc = EventAccumulator(sys.argv[1], size_guidance={"scalars": 0})
acc.Reload()
for tag in sorted(acc.Tags()["scalars"]):
    for event in acc.Scalars(tag):
        print(tag, event.step, repr(event.value))
