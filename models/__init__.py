"""Cost models: each fits from measurements and predicts; none of them solves."""
