import pytest

from densecode.cli import main
from densecode.config import load_config
from densecode.errors import ConfigError


def test_defaults_and_override():
    cfg = load_config(None, ["train.lr=1e-6", 'generation.stop=["\\n#"]', "reward.weights.sim=0.5"])
    assert cfg.train.lr == pytest.approx(1e-6)
    assert cfg.generation.stop == ["\n#"]
    assert cfg.reward.weights["sim"] == 0.5


def test_yaml_base_chain(tmp_path):
    (tmp_path / "a.yaml").write_text("train:\n  steps: 7\n  lr: 1e-4\n")
    (tmp_path / "b.yaml").write_text("base: a.yaml\ntrain:\n  lr: 2e-4\n")
    cfg = load_config(tmp_path / "b.yaml")
    assert cfg.train.steps == 7 and cfg.train.lr == pytest.approx(2e-4)


def test_unknown_key_names_key_and_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("train:\n  lrr: 1\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: unknown key 'train.lrr'"):
        load_config(bad)


def test_wrong_type_names_key(tmp_path):
    with pytest.raises(ConfigError, match=r"--set train.steps=abc: key 'train.steps' expects an integer"):
        load_config(None, ["train.steps=abc"])
    bad = tmp_path / "t.yaml"
    bad.write_text("lora:\n  target_modules: q_proj\n")
    with pytest.raises(ConfigError, match=r"t.yaml: key 'lora.target_modules' expects a list"):
        load_config(bad)


def test_bad_choice_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="generation.grammar"):
        load_config(None, ["generation.grammar=maybe"])
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.yaml")


def test_cli_error_exit_code(capsys):
    assert main(["config", "--set", "nope.x=1"]) == 2
    err = capsys.readouterr().err
    assert "unknown key 'nope'" in err and "Traceback" not in err


def test_mapping_overrides_merge():
    cfg = load_config(None, ["reward.weights.sim=0.5", "reward.weights.kl=0.2",
                             "reward.components.tests.fail_penalty=-0.5"])
    assert cfg.reward.weights["sim"] == 0.5 and cfg.reward.weights["kl"] == 0.2
    assert cfg.reward.components == {"tests": {"fail_penalty": -0.5}}
