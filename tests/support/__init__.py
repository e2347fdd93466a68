"""Helpers shared by the tests."""

#: bootstrap resamples for the regression gate in tests, fewer than ``med-evals regress``'s
#: default 1,000: no decision the tests make hangs on the interval's last digit
#: (``test_n_boot_is_an_option`` checks the default)
N_BOOT = 200
#: the same, as ``med-evals regress`` arguments
NB = ("--n-boot", str(N_BOOT))
