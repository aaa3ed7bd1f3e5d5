"""The e2e suite for any cluster (cluster_suite.py) against the previous
release's chart (tests/e2e/fixtures/chart-previous, rendered by `helm
template` as test_upgrade.py renders it), as .github/workflows/e2e-kind.yml
runs it before `helm upgrade`: test_cluster_suite_local.py's install with that
chart's webhook template, TLS Secret and Deployment args, and this tree's
binary (the workflow installs the previous chart with this tree's image too).
Every wait is bounded.
"""

import sys
import unittest

import cluster_suite as suite
import test_cluster_suite_local as local
from test_upgrade import PREVIOUS_CHART, helm_template, tools


def setUpModule():
    if not tools.HELM:
        raise unittest.SkipTest(tools.NO_HELM)
    local.install(helm_template(PREVIOUS_CHART))


def tearDownModule():
    local.uninstall()


globals().update(suite.classes_for(__name__))


def load_tests(loader, standard_tests, pattern):
    return suite.load_driver_tests(loader, sys.modules[__name__])


if __name__ == "__main__":
    unittest.main()
