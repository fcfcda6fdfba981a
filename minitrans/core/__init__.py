"""The ground floor: which array library runs (backend), the strict test
backend, the switch between reference and fast kernels (kernels), the cores
this process may use (threads), the machine's memory against what a model
needs (memory_budget), and the checks that turn bad input into clear
errors. Everything else in minitrans stands on these; they import
nothing from above."""
