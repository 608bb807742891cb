"""Job.watch across a lost stream, against a scripted coordinator: a real
gRPC server on 127.0.0.1:0 whose WatchJob plays a script per call (events,
then an error or the end), so that each case of the reconnect rules
(client/watch_retry.h, followed by the client) happens exactly once. The
live cluster's tests are in test_client.py."""

import logging
import time
import unittest
from concurrent import futures

import grpc

from autoaccel import Client, errors
from autoaccel._proto import autoaccel_pb2 as pb
from autoaccel._proto import autoaccel_pb2_grpc as pb_grpc


def event(state, *trials):
    return pb.JobEvent(job=pb.Job(job_id="job-1", state=state),
                       trials=[pb.Trial(trial_id=t, job_id="job-1", status=s) for t, s in trials])


class ScriptedCoordinator(pb_grpc.TuningServiceServicer):
    """WatchJob call i sends scripts[i]'s events, then aborts with its code
    (None: ends the stream)."""

    def __init__(self, scripts):
        self.scripts = list(scripts)
        self.calls = []  # monotonic time of each WatchJob

    def WatchJob(self, request, context):
        self.calls.append(time.monotonic())
        events, code = self.scripts.pop(0)
        for e in events:
            yield e
        if code is not None:
            context.abort(code, "scripted %s" % code.name)

    def GetJob(self, request, context):
        return pb.Job(job_id=request.job_id, state="RUNNING")


class WatchReconnectTest(unittest.TestCase):
    def serve(self, scripts):
        coordinator = ScriptedCoordinator(scripts)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        pb_grpc.add_TuningServiceServicer_to_server(coordinator, server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        self.addCleanup(server.stop, None)
        client = Client("127.0.0.1:%d" % port, token="a-token-of-sixteen-chars", timeout=5)
        self.addCleanup(client.close)
        return coordinator, client.job("job-1")

    def test_a_lost_stream_is_opened_again_and_repeats_no_trial(self):
        coordinator, job = self.serve([
            ([event("RUNNING", ("t1", "RUNNING"))], grpc.StatusCode.UNAVAILABLE),
            # The new stream's first event lists every trial again.
            ([event("RUNNING", ("t1", "RUNNING"), ("t2", "SUCCEEDED")),
              event("SUCCEEDED", ("t1", "SUCCEEDED"))], None),
        ])
        with self.assertLogs("autoaccel", logging.WARNING) as said:
            events = list(job.watch(reconnect_for=30))
        self.assertEqual([[(t.trial_id, t.status) for t in e.trials] for e in events],
                         [[("t1", "RUNNING")], [("t2", "SUCCEEDED")], [("t1", "SUCCEEDED")]])
        self.assertEqual(events[-1].job.state, "SUCCEEDED")
        self.assertEqual(len(coordinator.calls), 2)
        # The first wait is 0.5 s, jittered by 20 %.
        self.assertGreaterEqual(coordinator.calls[1] - coordinator.calls[0], 0.39)
        self.assertIn("lost the coordinator", said.output[0])
        self.assertIn("reconnected", said.output[-1])

    def test_a_stream_that_ends_before_the_job_is_followed_again(self):
        coordinator, job = self.serve([
            ([event("RUNNING")], None),
            ([event("CANCELLED")], None),
        ])
        with self.assertLogs("autoaccel", logging.WARNING):
            states = [e.job.state for e in job.watch(reconnect_for=30)]
        self.assertEqual(states, ["RUNNING", "CANCELLED"])

    def test_without_a_reconnect_budget_a_lost_stream_is_an_error(self):
        _, job = self.serve([([event("RUNNING")], grpc.StatusCode.UNAVAILABLE)])
        with self.assertRaises(errors.UnavailableError):
            list(job.watch(reconnect_for=0))

    def test_a_stream_that_never_delivered_fails_at_once_with_its_error(self):
        coordinator, job = self.serve([([], grpc.StatusCode.UNAVAILABLE)])
        with self.assertRaises(errors.UnavailableError):
            list(job.watch(reconnect_for=30))
        self.assertEqual(len(coordinator.calls), 1)

    def test_an_error_no_retry_can_fix_ends_the_watch(self):
        coordinator, job = self.serve([([event("RUNNING")], grpc.StatusCode.PERMISSION_DENIED)])
        with self.assertRaises(errors.PermissionDeniedError) as caught:
            list(job.watch(reconnect_for=30))
        self.assertEqual(caught.exception.message, "scripted PERMISSION_DENIED")
        self.assertEqual(len(coordinator.calls), 1)

    def test_reconnecting_gives_up_when_the_budget_is_spent(self):
        coordinator, job = self.serve([([event("RUNNING")], grpc.StatusCode.UNAVAILABLE)] +
                                      [([], grpc.StatusCode.UNAVAILABLE)] * 5)
        start = time.monotonic()
        with self.assertLogs("autoaccel", logging.WARNING):
            with self.assertRaises(errors.UnavailableError) as caught:
                list(job.watch(reconnect_for=1.2))
        self.assertIn("gave up reconnecting", caught.exception.message)
        self.assertLess(time.monotonic() - start, 5)
        self.assertGreaterEqual(len(coordinator.calls), 2)


if __name__ == "__main__":
    unittest.main()
