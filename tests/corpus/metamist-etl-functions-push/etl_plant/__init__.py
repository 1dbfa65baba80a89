# Written here after the shape of populationgenomics/metamist metamist_infrastructure/__init__.py
from etl_plant.plant import EtlPlant

__all__ = ["EtlPlant"]
