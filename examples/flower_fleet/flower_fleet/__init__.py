"""jetpredict's Flower fleet example as a Flower app: FedAvg on simulated (or real) Jetsons, with power modes
planned by jetpredict under a round deadline, against MAXN and preset baselines."""
