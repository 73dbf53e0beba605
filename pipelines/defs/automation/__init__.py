"""What spans the concerns: the nightly schedule and the run-failure sensor."""
