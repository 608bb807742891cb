"""Results as tables, for a notebook or a spreadsheet.

`to_rows(items)` turns a list of the client's result dataclasses (trials,
`JobInfo.standings`, stored answers, workers, an estimate's strategies, ...)
into one flat dict per item: a nested dataclass becomes dotted columns
(`metrics.tokens_per_second`, `strategy.text`), an unset one a single None
column, lists stay lists. `to_dataframe(items)` is the same table as a pandas
DataFrame; pandas is optional, imported only there.

    import autoaccel
    trials = client.trials(job_id)
    autoaccel.to_dataframe(trials).sort_values("metrics.tokens_per_second")
"""

import dataclasses
from typing import Any, Dict, Iterable, List


def _flatten(value: Any, prefix: str, row: Dict[str, Any]) -> None:
    for f in dataclasses.fields(value):
        v = getattr(value, f.name)
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            _flatten(v, prefix + f.name + ".", row)
        else:
            row[prefix + f.name] = v


def to_rows(items: Iterable[Any]) -> List[Dict[str, Any]]:
    """One flat dict per result dataclass in `items`, in their order.
    TypeError for an item that is not a result dataclass instance."""
    rows = []
    for i, item in enumerate(items):
        if not dataclasses.is_dataclass(item) or isinstance(item, type):
            raise TypeError("to_rows: item %d is a %s, not one of autoaccel's results"
                            % (i, type(item).__name__))
        row: Dict[str, Any] = {}
        _flatten(item, "", row)
        rows.append(row)
    return rows


def to_dataframe(items: Iterable[Any]):
    """`to_rows(items)` as a pandas DataFrame (one row per item, columns in
    the first item's order). ImportError, saying what to install, without
    pandas."""
    try:
        import pandas
    except ImportError as e:
        raise ImportError("autoaccel.to_dataframe needs pandas (pip install pandas); "
                          "autoaccel.to_rows gives the same table as a list of dicts") from e
    return pandas.DataFrame(to_rows(items))
