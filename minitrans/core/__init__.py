"""The ground floor: which array library runs (backend), the strict test
backend, and the checks that turn bad input into clear errors. Everything
else in minitrans stands on these; they import nothing from above."""
