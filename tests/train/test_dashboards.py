"""Each logger's adapter (andrea.train.lit.dashboards): what andrea sends beyond Lightning's scalars goes through
it, and a logger andrea does not know gets the scalars only."""

from lightning.pytorch.loggers import CSVLogger, Logger, TensorBoardLogger

from andrea.train.lit import dashboards
from andrea.train.lit.dashboards import Dashboard, TensorBoardDashboard, WandbDashboard, dashboard
from andrea.train.lit.map_probe import DrawnMap


def test_each_logger_gets_its_adapter(tmp_path):
    from lightning.pytorch.loggers import WandbLogger

    class MyTensorBoard(TensorBoardLogger):  # a subclass: its base's adapter
        pass

    assert type(dashboard(TensorBoardLogger(tmp_path))) is TensorBoardDashboard
    assert type(dashboard(MyTensorBoard(tmp_path))) is TensorBoardDashboard
    assert type(dashboard(CSVLogger(tmp_path))) is Dashboard
    assert dashboards.ADAPTERS[WandbLogger] is WandbDashboard


class Shown(Logger):
    """A logger of a user's: what it was sent (every one made, in SHOWN)."""

    name, version, experiment = "shown", 0, None

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[tuple] = []
        SHOWN.append(self)

    def log_metrics(self, metrics, step=None) -> None:
        pass

    def log_hyperparams(self, params, *args, **kwargs) -> None:
        pass


SHOWN: list[Shown] = []


class ShownDashboard(Dashboard):
    logger: Shown

    def image(self, key: str, drawn: DrawnMap, step: int) -> None:
        self.logger.sent.append(("image", key, step))

    def finish(self, status: str) -> None:
        self.logger.sent.append(("finish", status))


def test_a_new_logger_is_one_adapter(tmp_path, monkeypatch):
    """A logger added to ADAPTERS gets the maps' images and its run closed, with nothing else changed."""
    from omegaconf import open_dict

    from andrea.train.pipeline import train
    from tests.compose import QUICK, compose_train

    monkeypatch.setitem(dashboards.ADAPTERS, Shown, ShownDashboard)
    cfg = compose_train(tmp_path, [*QUICK, "logger=csv"])
    with open_dict(cfg):
        cfg.logger.shown = {"_target_": f"{__name__}.Shown"}
    SHOWN.clear()
    train(cfg)
    (shown,) = SHOWN
    images = [sent for sent in shown.sent if sent[0] == "image"]
    assert images and all(key.startswith("attention/layer") for _, key, _ in images)
    assert shown.sent[-1] == ("finish", "success")
