from django.urls import path

from memory import api

urlpatterns = [
    path("memories/", api.FactListApi.as_view(), name="memory-list"),
    path("memories/<str:fact_id>/", api.FactDetailApi.as_view(), name="memory-detail"),
]
