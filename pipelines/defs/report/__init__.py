"""The contact-center report asset and the sensor that materializes it after the night."""
