"""autoaccel.to_rows and autoaccel.to_dataframe on the client's results, built
from protobuf messages as the client builds them (no server). to_dataframe is
checked with pandas where the interpreter has it (the torchtitan layer of
scripts/setup does), and its ImportError where it does not."""
import importlib.util
import unittest

import autoaccel
from autoaccel import results
from autoaccel._convert import from_message
from autoaccel._proto import autoaccel_pb2 as pb


def trials():
    measured = pb.Trial(trial_id="j-t0", index=0, status="SUCCEEDED",
                        strategy=pb.Strategy(text="mbs=8,precision=bf16"),
                        metrics=pb.TrialMetrics(tokens_per_second=2900.0, noisy=True),
                        worker_ids=["w1"])
    pruned = pb.Trial(trial_id="j-t1", index=1, status="PRUNED", reason="predicted not to fit")
    return [from_message(results.Trial, t) for t in (measured, pruned)]


class TablesTest(unittest.TestCase):
    def test_rows_flatten_nested_results_into_dotted_columns(self):
        rows = autoaccel.to_rows(trials())
        self.assertEqual(rows[0]["metrics.tokens_per_second"], 2900.0)
        self.assertTrue(rows[0]["metrics.noisy"])
        self.assertEqual(rows[0]["strategy.text"], "mbs=8,precision=bf16")
        self.assertEqual(rows[0]["worker_ids"], ["w1"])
        # An unset message is one None column, not a row of zeros.
        self.assertIsNone(rows[1]["metrics"])
        self.assertEqual(rows[1]["reason"], "predicted not to fit")

    def test_rows_refuse_what_is_not_a_result(self):
        with self.assertRaisesRegex(TypeError, "item 1 is a dict"):
            autoaccel.to_rows([trials()[0], {"trial_id": "x"}])

    @unittest.skipUnless(importlib.util.find_spec("pandas"), "no pandas here")
    def test_dataframe_has_a_row_per_result(self):
        frame = autoaccel.to_dataframe(trials())
        self.assertEqual(len(frame), 2)
        self.assertEqual(frame.loc[0, "metrics.tokens_per_second"], 2900.0)
        self.assertEqual(list(frame["status"]), ["SUCCEEDED", "PRUNED"])

    @unittest.skipIf(importlib.util.find_spec("pandas"), "pandas is here")
    def test_without_pandas_the_error_says_what_to_install(self):
        with self.assertRaisesRegex(ImportError, "pip install pandas"):
            autoaccel.to_dataframe(trials())


if __name__ == "__main__":
    unittest.main()
