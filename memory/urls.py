from django.urls import path

from memory import api

urlpatterns = [
    path("memories/", api.FactListApi.as_view(), name="memory-list"),
    # Before the detail route, whose `fact_id` would otherwise take "delete" (and refuse it).
    path("memories/delete/", api.FactsDeleteApi.as_view(), name="memory-delete"),
    path("memories/<str:fact_id>/", api.FactDetailApi.as_view(), name="memory-detail"),
]
