"""The fault matrices' shared run and checks are plain modules: have pytest rewrite their
asserts as it does a test file's, so a failing check still shows what it compared."""

import pytest

pytest.register_assert_rewrite("faults.matrix", "faults.matrix_checks")
