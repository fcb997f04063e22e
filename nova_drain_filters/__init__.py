"""Nova scheduler filters that keep unusable hosts out of scheduling."""
