"""Run os-ken applications listening on 127.0.0.1:PORT only (PyPI's os-ken
has no osken-manager): run_osken.py PORT MODULE_PATH..."""

import os
import sys

from os_ken import cfg
from os_ken.base import app_manager


def main():
    port = sys.argv[1]
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    cfg.CONF(args=["--ofp-listen-host", "127.0.0.1", "--ofp-tcp-listen-port", port],
             project="os_ken")
    apps = ["os_ken.controller.ofp_handler"] + sys.argv[2:]
    app_manager.AppManager.run_apps(apps)


if __name__ == "__main__":
    main()
