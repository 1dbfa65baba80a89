"""What a run recorded, and nothing that judges it: the records' format (`records`), the seal written last
(`seal`), where evidence is read from and which parts (`store`), one run per directory (`locks`)."""
